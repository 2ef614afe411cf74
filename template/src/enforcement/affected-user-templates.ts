// The texts of redress messages (DSA Art. 17 statements to the affected user, Art. 20 complaint
// outcomes), one set per language; a locale without its own set falls back to English.

/** What a statement to the affected user says: the statement of reasons' facts plus the redress. */
export interface StatementFacts {
  decisionId: string;
  applicationDate: string;
  category: string;
  restrictions: string[];
  territorialScope: string[] | null;
  ground: "illegal_content" | "incompatible_content";
  legalGround: string | null;
  incompatibleGround: string | null;
  explanation: string;
  facts: string;
  automatedDetection: boolean;
  automatedDecision: "fully" | "partially" | "not_automated";
}

export interface RedressOptions {
  complaintDeadline: string;
  complaintUrl: string | null;
  settlementBodies: { name: string; url: string }[];
}

interface Texts {
  statementTitle: string;
  restriction: string;
  scope: string;
  scopeAll: string;
  illegal: (legalGround: string | null) => string;
  incompatible: (ground: string | null) => string;
  explanation: string;
  facts: string;
  detection: (automated: boolean) => string;
  decision: Record<StatementFacts["automatedDecision"], string>;
  redressTitle: string;
  complaint: (deadline: string, url: string | null) => string;
  settlement: string;
  noSettlement: string;
  courts: string;
  outcomeTitle: Record<string, string>;
  outcomeBody: Record<string, string>;
  outcomeReason: string;
  furtherRedress: string;
}

const EN: Texts = {
  statementTitle: "We restricted your content or account. This is our statement of reasons.",
  restriction: "What we did",
  scope: "Where",
  scopeAll: "everywhere our service is offered",
  illegal: (legalGround) => `Why: we consider the content illegal${legalGround ? ` under ${legalGround}` : ""}.`,
  incompatible: (ground) => `Why: the content is incompatible with our terms and conditions${ground ? ` (${ground})` : ""}.`,
  explanation: "Explanation",
  facts: "Facts and circumstances",
  detection: (automated) => (automated ? "The content was detected by automated means." : "The content was not detected by automated means."),
  decision: { fully: "The decision was taken by automated means.", partially: "The decision was taken partly by automated means.", not_automated: "The decision was taken by a person." },
  redressTitle: "How you can contest this decision",
  complaint: (deadline, url) => `You can file a complaint with us until ${deadline}${url ? ` at ${url}` : ""}; a person will review it.`,
  settlement: "You can also turn to a certified out-of-court dispute settlement body:",
  noSettlement: "You can also turn to an out-of-court dispute settlement body certified under Art. 21 of the Digital Services Act.",
  courts: "You can always take the matter to court.",
  outcomeTitle: { upheld: "We reviewed your complaint and kept our decision.", overturned: "We reviewed your complaint and reversed our decision." },
  outcomeBody: { upheld: "The restriction stays in place.", overturned: "The restriction is lifted." },
  outcomeReason: "Our reasons",
  furtherRedress: "If you disagree, you can turn to an out-of-court dispute settlement body or to the courts.",
};

const DE: Texts = {
  statementTitle: "Wir haben Ihre Inhalte oder Ihr Konto eingeschränkt. Dies ist unsere Begründung.",
  restriction: "Was wir getan haben",
  scope: "Wo",
  scopeAll: "überall, wo unser Dienst angeboten wird",
  illegal: (legalGround) => `Warum: Wir halten den Inhalt für rechtswidrig${legalGround ? ` nach ${legalGround}` : ""}.`,
  incompatible: (ground) => `Warum: Der Inhalt ist mit unseren Nutzungsbedingungen unvereinbar${ground ? ` (${ground})` : ""}.`,
  explanation: "Erläuterung",
  facts: "Tatsachen und Umstände",
  detection: (automated) => (automated ? "Der Inhalt wurde mit automatisierten Mitteln erkannt." : "Der Inhalt wurde nicht mit automatisierten Mitteln erkannt."),
  decision: {
    fully: "Die Entscheidung wurde mit automatisierten Mitteln getroffen.",
    partially: "Die Entscheidung wurde teilweise mit automatisierten Mitteln getroffen.",
    not_automated: "Die Entscheidung hat ein Mensch getroffen.",
  },
  redressTitle: "Wie Sie diese Entscheidung anfechten können",
  complaint: (deadline, url) => `Sie können bis zum ${deadline} bei uns Beschwerde einlegen${url ? ` unter ${url}` : ""}; ein Mensch prüft sie.`,
  settlement: "Sie können sich auch an eine zertifizierte außergerichtliche Streitbeilegungsstelle wenden:",
  noSettlement: "Sie können sich auch an eine nach Art. 21 des Gesetzes über digitale Dienste zertifizierte außergerichtliche Streitbeilegungsstelle wenden.",
  courts: "Der Rechtsweg steht Ihnen jederzeit offen.",
  outcomeTitle: { upheld: "Wir haben Ihre Beschwerde geprüft und unsere Entscheidung beibehalten.", overturned: "Wir haben Ihre Beschwerde geprüft und unsere Entscheidung aufgehoben." },
  outcomeBody: { upheld: "Die Einschränkung bleibt bestehen.", overturned: "Die Einschränkung wird aufgehoben." },
  outcomeReason: "Unsere Gründe",
  furtherRedress: "Wenn Sie nicht einverstanden sind, können Sie sich an eine außergerichtliche Streitbeilegungsstelle oder an die Gerichte wenden.",
};

const TEXTS: Record<string, Texts> = { en: EN, de: DE };

/** The languages with their own templates. */
export const TEMPLATE_LANGUAGES = Object.keys(TEXTS);

/** `de-AT` → `de`; a locale without templates (or none) → `en`. */
export function templateLanguage(locale: string | null | undefined): string {
  const language = (locale ?? "").split(/[-_]/u)[0]!.toLowerCase();
  return language in TEXTS ? language : "en";
}

function redressLines(t: Texts, redress: RedressOptions): string[] {
  return [
    t.redressTitle,
    `- ${t.complaint(redress.complaintDeadline.slice(0, 10), redress.complaintUrl)}`,
    redress.settlementBodies.length ? `- ${t.settlement} ${redress.settlementBodies.map((b) => `${b.name} (${b.url})`).join("; ")}` : `- ${t.noSettlement}`,
    `- ${t.courts}`,
  ];
}

/** The statement of reasons to the affected user (Art. 17(3)), with the redress available. */
export function renderStatement(language: string, facts: StatementFacts, redress: RedressOptions): string {
  const t = TEXTS[language] ?? EN;
  return [
    t.statementTitle,
    "",
    `${t.restriction}: ${facts.restrictions.join(", ")} (${facts.applicationDate}; ${facts.decisionId}).`,
    `${t.scope}: ${facts.territorialScope?.length ? facts.territorialScope.join(", ") : t.scopeAll}.`,
    facts.ground === "illegal_content" ? t.illegal(facts.legalGround) : t.incompatible(facts.incompatibleGround),
    `${t.explanation}: ${facts.explanation}`,
    `${t.facts}: ${facts.facts}`,
    `${t.detection(facts.automatedDetection)} ${t.decision[facts.automatedDecision]}`,
    "",
    ...redressLines(t, redress),
  ].join("\n");
}

/** The outcome of a complaint to the appellant (Art. 20(5)), with the redress still open. */
export function renderComplaintOutcome(language: string, input: { outcome: string; restricted: boolean; reason: string | null; settlementBodies: RedressOptions["settlementBodies"] }): string {
  const t = TEXTS[language] ?? EN;
  return [
    t.outcomeTitle[input.outcome] ?? input.outcome,
    // Only a restriction stays or goes; a notifier contesting a decision not to act is told the outcome alone.
    ...(input.restricted && t.outcomeBody[input.outcome] ? [t.outcomeBody[input.outcome]!] : []),
    ...(input.reason ? [`${t.outcomeReason}: ${input.reason}`] : []),
    "",
    t.furtherRedress,
    ...(input.settlementBodies.length ? [`${t.settlement} ${input.settlementBodies.map((b) => `${b.name} (${b.url})`).join("; ")}`] : []),
  ].join("\n");
}
