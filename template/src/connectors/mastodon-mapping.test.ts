// The pure parts of the Mastodon connector: an Admin::Report as a report, and a message as one status.
import { describe, expect, it } from "vitest";
import { mastodonConfig, mastodonIntake } from "./mastodon-mapping";
import { directMessageText } from "./mastodon-transport";

const report = (extra: Record<string, unknown> = {}) => ({
  id: "55",
  category: "violation",
  comment: "rude",
  account: { id: "1", username: "alice", domain: null },
  target_account: { id: "2", username: "bob", domain: "elsewhere.example", locale: "de-AT", account: { acct: "bob@elsewhere.example", url: "https://elsewhere.example/@bob" } },
  statuses: [],
  rules: [{ id: "3", text: "Be kind" }],
  ...extra,
});

describe("mastodonIntake", () => {
  it("takes the first mapped rule's category over the Mastodon category, keeps a local reporter's handle and the target's locale", () => {
    const config = mastodonConfig({ rules: { "3": "illegal_or_harmful_speech" } });
    const { report: input, remoteReportId, targetAccountId } = mastodonIntake("m.example", config, report());
    expect({ remoteReportId, targetAccountId }).toEqual({ remoteReportId: "55", targetAccountId: "2" });
    expect(input).toMatchObject({
      category: "illegal_or_harmful_speech",
      subject: { kind: "account", id: "mastodon:m.example:account:2", url: "https://elsewhere.example/@bob", ownerId: "mastodon:m.example:account:2" },
      reporter: { id: "mastodon:m.example:account:1", contact: "@alice" },
      description: "rude",
      locale: "de-AT",
    });
  });

  it("a forwarded report's remote reporter gets no handle; an unknown category counts as other; no e-mail or IP is kept", () => {
    const { report: input } = mastodonIntake(
      "m.example",
      mastodonConfig({ categories: { other: "violence" } }),
      report({ category: "nonsense", rules: [], account: { id: "9", username: "relay", domain: "remote.example", email: "x@y.z", ip: "1.2.3.4" } }),
    );
    expect(input.category).toBe("violence");
    expect(input.reporter).toEqual({ id: "mastodon:m.example:account:9" });
    expect(JSON.stringify(input)).not.toMatch(/x@y\.z|1\.2\.3\.4/u);
  });

  it("refuses a report without an id or a target account", () => {
    expect(() => mastodonIntake("m.example", mastodonConfig({}), report({ id: undefined }))).toThrow(expect.objectContaining({ code: "connector.payload_invalid" }));
    expect(() => mastodonIntake("m.example", mastodonConfig({}), report({ target_account: null }))).toThrow(expect.objectContaining({ code: "connector.payload_invalid" }));
    expect(() => mastodonConfig({ rules: { "1": "not-a-category" } })).toThrow(expect.objectContaining({ code: "connector.category_unknown" }));
  });
});

describe("directMessageText", () => {
  it("fits a decision with long reasons in 500 characters and keeps the redress whole", () => {
    const text = directMessageText("@alice", {
      kind: "notice_decision",
      facts: { restricts: true, restrictions: { account: "suspended" }, statement: "x".repeat(2000), redress: { internalComplaint: { until: "2027-06-01T00:00:00.000Z", reference: "dec_1" } } },
    });
    expect(text.length).toBeLessThanOrEqual(500);
    expect(text.startsWith("@alice ")).toBe(true);
    expect(text).toContain("account: suspended");
    expect(text).toMatch(/until 2027-06-01 \(reference dec_1\).*or go to court\.$/u);
  });

  it("shortens any other message's body to fit", () => {
    const text = directMessageText("@alice", { kind: "notifier_warning", body: "y".repeat(900) });
    expect(text.length).toBe(500);
    expect(text.endsWith("…")).toBe(true);
  });
});
