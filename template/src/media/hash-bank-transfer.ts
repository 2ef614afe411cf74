// A bank's entries in and out in bulk: a CSV hash list imported as entries (hash-bank-csv.ts reads
// the HMA/ThreatExchange format), and the whole bank streamed out as CSV, shard by shard, to admins.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError } from "../errors";
import { CSV_HEADER, csvRow, parseHashCsv } from "./hash-bank-csv";
import { addHashBankEntries, bankOf, type HashBankRow, shardStub } from "./hash-banks";
import type { ShardEntry } from "./pdq-index-shard";

/** Imports a CSV hash list (hash-bank-csv.ts): its PDQ rows are added as by addHashBankEntries. */
export async function importHashBankCsv(env: Env, actor: Actor, bankId: string, text: string) {
  await bankOf(env, actor.installationId, bankId);
  const parsed = parseHashCsv(text);
  if (parsed.entries.length === 0 && parsed.invalid > 0) {
    throw new AppError("hash_bank.csv_invalid", "No row of this CSV holds a PDQ hash (64 hex digits); see details for the first lines refused.", { status: 422, details: { invalidLines: parsed.invalidLines } });
  }
  const result = await addHashBankEntries(env, actor, bankId, parsed.entries, "csv", { otherTypes: parsed.otherTypes, invalid: parsed.invalid });
  return { ...result, rows: parsed.entries.length, otherTypes: parsed.otherTypes, invalid: parsed.invalid, invalidLines: parsed.invalidLines };
}

/** The bank as CSV (hash-bank-csv.ts), streamed shard by shard, to admins only (403 otherwise); audited. */
export async function exportHashBankCsv(env: Env, actor: Actor, bankId: string): Promise<ReadableStream<Uint8Array>> {
  // The bank's hashes are for admins only: the route is closed to `read` (readOpens: false), and so is this export for any other caller.
  if (!actor.scopes.includes("admin")) throw new AppError("auth.scope_missing", "Exporting a hash bank needs the admin scope.", { status: 403, details: { required: ["admin"] } });
  const bank = await bankOf(env, actor.installationId, bankId);
  await auditStatement(env.DB, {
    installationId: bank.installationId,
    idempotencyKey: `hash_bank:${bank.id}:exported:${crypto.randomUUID()}`,
    action: "hash_bank.exported",
    actor: actor.audit,
    target: { type: "hash_bank", id: bank.id },
    details: { name: bank.name },
    at: new Date().toISOString(),
  }).run();
  const encoder = new TextEncoder();
  const entries = hashBankEntries(env, bank);
  let started = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        controller.enqueue(encoder.encode(CSV_HEADER));
      }
      let chunk = "";
      for (let i = 0; i < 1000; i += 1) {
        const next = await entries.next();
        if (next.done) {
          if (chunk) controller.enqueue(encoder.encode(chunk));
          controller.close();
          return;
        }
        chunk += csvRow(next.value);
      }
      controller.enqueue(encoder.encode(chunk));
    },
  });
}

/** Every entry of the bank, shard by shard in id order, `pageSize` at a time (an export). */
export async function* hashBankEntries(env: Env, bank: HashBankRow, pageSize = 5_000): AsyncGenerator<ShardEntry> {
  for (let shard = 0; shard < bank.shards; shard += 1) {
    let after = 0;
    for (;;) {
      const { entries } = await shardStub(env, bank, shard).page(after, pageSize);
      for (const entry of entries) yield entry;
      if (entries.length < pageSize) break;
      after = entries[entries.length - 1]!.id;
    }
  }
}
