// What a Mastodon connector says in our terms (pure): its settings, Mastodon's report categories
// and server rules mapped onto the policy taxonomy, and an Admin::Report (the object of the
// `report.created` admin webhook, docs.joinmastodon.org/admin/webhooks) as one report's intake.
import { AppError } from "../errors";
import { normalizeCategory, type PolicyCategory } from "../cases";

export const CONNECTOR_KINDS = ["mastodon"] as const;
/** Admin::Report `category` (Mastodon 4). */
export const MASTODON_CATEGORIES = ["spam", "legal", "violation", "other"] as const;
export type MastodonCategory = (typeof MASTODON_CATEGORIES)[number];
/**
 * What an action type does through the admin API: an account action
 * (POST /api/v1/admin/accounts/:id/action, `type`), or resolving the report
 * (POST /api/v1/admin/reports/:id/resolve).
 */
export const MASTODON_ACTIONS = ["none", "sensitive", "disable", "silence", "suspend", "resolve"] as const;
export type MastodonAction = (typeof MASTODON_ACTIONS)[number];

export interface MastodonConfig {
  categories: Record<MastodonCategory, PolicyCategory>;
  /** A server rule's id → our category; a report naming a mapped rule takes its category. */
  rules: Record<string, PolicyCategory>;
  /** Action type key → what it does on the server. */
  actions: Record<string, MastodonAction>;
  /** `send_email_notification` of account actions, unless the action's params say otherwise. */
  notifyByEmail: boolean;
  /** Tell reporters on this server the decision on their report, as a direct message (message.send). */
  tellReporters: boolean;
}

export const DEFAULT_CATEGORIES: Record<MastodonCategory, PolicyCategory> = {
  spam: "scams_and_fraud",
  // "It's illegal": a notice of illegal content whose kind the reporter did not specify.
  legal: "not_specified_notice",
  violation: "other_violation_tc",
  other: "other_violation_tc",
};

/** Action type keys that work without any mapping (docs/mastodon.md). */
export const DEFAULT_ACTIONS: Record<string, MastodonAction> = {
  "mastodon.silence": "silence",
  "mastodon.suspend": "suspend",
  "mastodon.sensitive": "sensitive",
  "mastodon.disable": "disable",
  "mastodon.warn": "none",
  "mastodon.resolve": "resolve",
};

function policyCategory(value: string, path: string): PolicyCategory {
  const category = normalizeCategory(value);
  if (!category) throw new AppError("connector.category_unknown", `${path}: unknown category; use a DSA statement category such as scams_and_fraud.`, { status: 422, details: { path } });
  return category;
}

/** The settings of a new connector, with defaults; categories are checked against the taxonomy. */
export function mastodonConfig(input: { categories?: Partial<Record<string, string>>; rules?: Record<string, string>; actions?: Record<string, string>; notifyByEmail?: boolean; tellReporters?: boolean }): MastodonConfig {
  const categories = { ...DEFAULT_CATEGORIES };
  for (const [key, value] of Object.entries(input.categories ?? {})) if (value) categories[key as MastodonCategory] = policyCategory(value, `categories.${key}`);
  const rules: Record<string, PolicyCategory> = {};
  for (const [key, value] of Object.entries(input.rules ?? {})) rules[key] = policyCategory(value, `rules.${key}`);
  return { categories, rules, actions: { ...DEFAULT_ACTIONS, ...(input.actions as Record<string, MastodonAction> | undefined) }, notifyByEmail: input.notifyByEmail ?? false, tellReporters: input.tellReporters ?? false };
}

/** Subject ids and people are named per server: `mastodon:<host>:account:<id>`, `mastodon:<host>:status:<id>`. */
export const mastodonId = (host: string, kind: "account" | "status", id: string) => `mastodon:${host}:${kind}:${id}`;

/** The parts of an Admin::Report this connector reads. */
interface AdminAccount {
  id?: unknown;
  username?: unknown;
  domain?: unknown;
  locale?: unknown;
  account?: { acct?: unknown; display_name?: unknown; url?: unknown; uri?: unknown } | null;
}
interface Status {
  id?: unknown;
  url?: unknown;
  uri?: unknown;
  created_at?: unknown;
  content?: unknown;
  spoiler_text?: unknown;
  sensitive?: unknown;
  language?: unknown;
  visibility?: unknown;
  media_attachments?: Array<{ type?: unknown; url?: unknown; description?: unknown }> | null;
}
export interface AdminReport {
  id?: unknown;
  category?: unknown;
  comment?: unknown;
  forwarded?: unknown;
  created_at?: unknown;
  account?: AdminAccount | null;
  target_account?: AdminAccount | null;
  statuses?: Status[] | null;
  rules?: Array<{ id?: unknown; text?: unknown }> | null;
  rule_ids?: unknown[] | null;
}

const text = (value: unknown, max = 2048): string | null => (typeof value === "string" && value.length > 0 ? value.slice(0, max) : typeof value === "number" ? String(value) : null);

export interface MastodonIntake {
  remoteReportId: string;
  targetAccountId: string;
  report: {
    subject: { kind: string; id: string; url?: string; snapshot?: unknown; ownerId?: string };
    category: string;
    source: string;
    reporter?: { id?: string; contact?: string };
    description?: string;
    locale?: string;
  };
}

/**
 * One report of ours from an Admin::Report: a single status is the subject (the account is its
 * owner); several statuses, or none, make the account the subject with the statuses in the
 * snapshot. Only what a reviewer needs is kept (never the accounts' e-mail or IP addresses).
 */
export function mastodonIntake(host: string, config: MastodonConfig, object: AdminReport): MastodonIntake {
  const remoteReportId = text(object.id, 100);
  const targetAccountId = text(object.target_account?.id, 100);
  if (!remoteReportId || !targetAccountId) throw new AppError("connector.payload_invalid", "The report.created object needs an id and a target_account with an id.", { status: 422 });
  const owner = mastodonId(host, "account", targetAccountId);
  const statuses = (Array.isArray(object.statuses) ? object.statuses : []).filter((s) => text(s?.id, 100));
  const rules = (Array.isArray(object.rules) ? object.rules : []).map((rule) => ({ id: text(rule?.id, 100), text: text(rule?.text, 1000) })).filter((rule) => rule.id);
  const ruleIds = [...new Set([...rules.map((rule) => rule.id!), ...(Array.isArray(object.rule_ids) ? object.rule_ids.map((id) => text(id, 100)).filter((id): id is string => id !== null) : [])])];
  const mastodonCategory = (MASTODON_CATEGORIES as readonly unknown[]).includes(object.category) ? (object.category as MastodonCategory) : "other";
  const ruleCategory = ruleIds.map((id) => (Object.hasOwn(config.rules, id) ? config.rules[id] : undefined)).find((category) => category !== undefined);
  const target = object.target_account!;
  const account = {
    id: targetAccountId,
    username: text(target.username, 300),
    acct: text(target.account?.acct, 300),
    displayName: text(target.account?.display_name, 300),
    url: text(target.account?.url),
    domain: text(target.domain, 300),
  };
  const snapshot = {
    source: "mastodon",
    server: host,
    report: { id: remoteReportId, category: mastodonCategory, ruleIds, rules, forwarded: object.forwarded === true, createdAt: text(object.created_at, 40) },
    account,
    statuses: statuses.map((s) => ({
      id: text(s.id, 100),
      url: text(s.url) ?? text(s.uri),
      createdAt: text(s.created_at, 40),
      content: text(s.content, 20_000),
      spoilerText: text(s.spoiler_text, 2000),
      sensitive: s.sensitive === true,
      language: text(s.language, 20),
      visibility: text(s.visibility, 20),
      media: (Array.isArray(s.media_attachments) ? s.media_attachments : []).slice(0, 20).map((m) => ({ type: text(m?.type, 20), url: text(m?.url), description: text(m?.description, 2000) })),
    })),
  };
  const single = statuses.length === 1 ? statuses[0]! : null;
  const subjectUrl = single ? (text(single.url) ?? text(single.uri)) : account.url;
  const reporterId = text(object.account?.id, 100);
  // A reporter of this server (no domain) is reached by a direct message to @username; a remote one (a forwarded report) is not.
  const reporterHandle = object.account && !object.account.domain ? text(object.account.username, 300) : null;
  const locale = text(target.locale, 40);
  const comment = text(object.comment, 10_000);
  return {
    remoteReportId,
    targetAccountId,
    report: {
      subject: {
        kind: single ? "content" : "account",
        id: single ? mastodonId(host, "status", text(single.id, 100)!) : owner,
        ...(subjectUrl ? { url: subjectUrl } : {}),
        ownerId: owner,
        snapshot,
      },
      category: ruleCategory ?? config.categories[mastodonCategory],
      source: "notice",
      ...(reporterId ? { reporter: { id: mastodonId(host, "account", reporterId), ...(reporterHandle ? { contact: `@${reporterHandle}` } : {}) } } : {}),
      ...(comment ? { description: comment } : {}),
      ...(locale && /^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8}){0,3}$/u.test(locale) ? { locale } : {}),
    },
  };
}
