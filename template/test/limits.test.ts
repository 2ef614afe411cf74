// The limits that bind at volume: one writer for each installation's R2 anchor, sweeps that drain
// their backlog, run admission that waits at the Workflows creation rate, and analytics computed
// from rollups. Each test creates its own installations and counts only what it created.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepAuditChains } from "../src/audit/chain-sweep";
import { api, newInstallation } from "./helpers";

const anchorObject = (installationId: string) => env.AUDIT_ANCHORS.head(`audit/${installationId}/head.json`);
const anchorDue = async (installationId: string) => env.DB.prepare("SELECT seq FROM audit_anchor_due WHERE installation_id = ?").bind(installationId).first<{ seq: number }>();
const newestCheckpoint = async (installationId: string) =>
  env.DB.prepare("SELECT seq, head_hash AS headHash FROM audit_checkpoints WHERE installation_id = ? ORDER BY seq DESC LIMIT 1").bind(installationId).first<{ seq: number; headHash: string }>();

describe("one anchor writer per installation", () => {
  it("after-write seals checkpoint in D1 and leave the anchor to the schedule, which moves it once", async () => {
    const { id, apiKey } = await newInstallation();
    for (let index = 0; index < 3; index++) {
      expect((await api("/api/v1/workflows", { key: apiKey, body: { name: `wf-${index}` } })).status).toBe(201);
      // Past the after-write coalescing window, so every write's own seal runs.
      await new Promise((resolve) => setTimeout(resolve, 2_100));
    }
    // Every write was linked and checkpointed in D1; R2 was never written.
    const checkpoint = await newestCheckpoint(id);
    expect(checkpoint?.seq).toBeGreaterThanOrEqual(3);
    expect(await anchorObject(id)).toBeNull();
    expect((await anchorDue(id))?.seq).toBe(checkpoint!.seq);
    // The scheduled sweep is the writer: one put, the due mark gone.
    const summary = await sweepAuditChains(env);
    expect(summary.anchored).toBeGreaterThanOrEqual(1);
    const anchored = await anchorObject(id);
    expect(anchored).not.toBeNull();
    expect(await (await env.AUDIT_ANCHORS.get(`audit/${id}/head.json`))!.json()).toMatchObject({ seq: checkpoint!.seq, headHash: checkpoint!.headHash });
    expect(await anchorDue(id)).toBeNull();
    // More writes: the anchor object is untouched until the next sweep.
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "later" } })).status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await anchorObject(id))?.etag).toBe(anchored!.etag);
    expect(await anchorDue(id)).not.toBeNull();
  }, 30_000);

  it("a verification right after the anchor moved does not write it again within a second; the mark stays for the sweep", async () => {
    const { id, apiKey } = await newInstallation();
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "one" } })).status).toBe(201);
    const first = await api("/api/v1/audit/verify", { key: apiKey });
    expect(first.body).toMatchObject({ ok: true, anchored: true });
    const held = await anchorObject(id);
    expect(held).not.toBeNull();
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "two" } })).status).toBe(201);
    const second = await api("/api/v1/audit/verify", { key: apiKey });
    expect(second.body).toMatchObject({ ok: true });
    const after = await anchorObject(id);
    if (Date.now() - held!.uploaded.getTime() < 900) {
      // Within the second: the anchor stayed, and the schedule will move it.
      expect(after!.etag).toBe(held!.etag);
      expect(await anchorDue(id)).not.toBeNull();
    }
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await sweepAuditChains(env);
    const checkpoint = await newestCheckpoint(id);
    expect(await (await env.AUDIT_ANCHORS.get(`audit/${id}/head.json`))!.json()).toMatchObject({ seq: checkpoint!.seq });
    expect(await anchorDue(id)).toBeNull();
    expect((await api("/api/v1/audit/verify?mode=full", { key: apiKey })).body).toMatchObject({ ok: true });
  }, 30_000);
});
