// What one match costs in calls: one call per shard of the bank, whatever the number of query
// hashes (an image's eight dihedral variants go together), and no D1 statement while the bank's
// configuration is cached in the isolate; the cached configuration still answers only its own
// installation.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { matchHashBank } from "../src/media/hash-banks";
import { api, newInstallation } from "./helpers";

/** `env` with its D1 statements and its shard calls counted. */
function counted() {
  const calls = { d1: 0, shards: new Map<string, number>() };
  const db = new Proxy(env.DB, {
    get(target, property) {
      if (property === "prepare") {
        return (sql: string) => {
          calls.d1 += 1;
          return target.prepare(sql);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const namespace = {
    idFromName: (name: string) => env.PDQ_INDEX.idFromName(name),
    get: (id: DurableObjectId) => {
      const stub = env.PDQ_INDEX.get(id);
      return {
        match: (queries: string[], threshold: number) => {
          calls.shards.set(id.toString(), (calls.shards.get(id.toString()) ?? 0) + 1);
          return stub.match(queries, threshold);
        },
      };
    },
  };
  return { env: { ...env, DB: db, PDQ_INDEX: namespace } as unknown as Env, calls };
}

const hashOf = (i: number) => i.toString(16).padStart(64, "0");

describe("a match's calls", () => {
  it("one call per shard for up to eight hashes, and none to D1 once the bank's configuration is cached", async () => {
    const { id: installationId, apiKey } = await newInstallation("match-calls");
    const bank = (await api("/api/v1/hash-banks", { key: apiKey, body: { name: "calls", kind: "pdq", shards: 5, qualityFloor: 0 } })).body as { id: string };
    const entries = Array.from({ length: 200 }, (_, i) => ({ hash: hashOf(i * 7919), tags: [`t${i % 3}`] }));
    expect((await api(`/api/v1/hash-banks/${bank.id}/entries`, { key: apiKey, body: { entries } })).body.added).toBe(200);
    const queries = Array.from({ length: 8 }, (_, i) => hashOf(i * 7919 * 3));

    const first = counted();
    const found = await matchHashBank(first.env, installationId, bank.id, { hashes: queries });
    expect(first.calls.d1).toBeLessThanOrEqual(1);
    expect([...first.calls.shards.values()]).toEqual([1, 1, 1, 1, 1]);
    // Each query is an entry: found at distance 0, whichever shard holds it.
    expect(
      found.matches
        .filter((m) => m.distance === 0)
        .map((m) => m.query)
        .sort(),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);

    const second = counted();
    const again = await matchHashBank(second.env, installationId, bank.id, { hashes: queries });
    expect(second.calls.d1).toBe(0);
    expect(second.calls.shards.size).toBe(5);
    expect(again.matches).toEqual(found.matches);

    // Cached for its installation only: another installation naming the bank gets a 404.
    const { id: otherInstallation } = await newInstallation("match-calls-other");
    await expect(matchHashBank(counted().env, otherInstallation, bank.id, { hashes: queries })).rejects.toMatchObject({ code: "hash_bank.not_found", status: 404 });
  });
});
