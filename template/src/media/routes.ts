// /api/v1/media/hashes: the SHA-256 and PDQ hashes of an image sent as the request body.
// /api/v1/hash-banks: banks of known PDQ hashes (admin), their entries, CSV import and export, and
// matching a hash against a bank (the keys that send reports in, reviewers, admins).
import { routes } from "../http/route";
import { exportHashBankCsv, importHashBankCsv } from "./hash-bank-transfer";
import { addHashBankEntries, createHashBank, deleteHashBank, getHashBank, listHashBanks, matchHashBank, matchView, removeHashBankEntries, updateHashBank } from "./hash-banks";
import { hashImage } from "./hashing";
import { AppError } from "../errors";

export const mediaRoutes = routes()
  .op(
    {
      method: "post",
      path: "/media/hashes",
      summary:
        "Hash an image (the body; content-type image/jpeg, image/png or image/webp; at most 8 MiB, 4,194,304 pixels and 48 MiB decoded): its SHA-256, and its PDQ hash with quality 0-100 and the hashes of its seven rotations and flips. Nothing is stored",
      auth: ["admin", "reports:write", "review"],
      consumes: ["image/jpeg", "image/png", "image/webp"],
      writes: false,
      ok: 200,
      errors: [413, 415, 422],
    },
    async (c) => {
      const { sha256, format, width, height, pdq } = await hashImage(c.req.header("content-type"), new Uint8Array(await c.req.arrayBuffer()));
      return { sha256, format, width, height, pdq };
    },
  )
  .op(
    {
      method: "post",
      path: "/hash-banks",
      summary: "Create a hash bank { name, kind: pdq, threshold (default 31), qualityFloor (default 50), shards (default 8, 262,144 entries each) }",
      auth: ["admin"],
      body: "CreateHashBank",
      ok: 201,
      errors: [409],
    },
    async (c, { body }) => createHashBank(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/hash-banks", summary: "List the installation's hash banks", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listHashBanks(c.env, c.get("actor")) }))
  .op({ method: "get", path: "/hash-banks/:id", summary: "Read a hash bank with its entry count", auth: ["admin"], ok: 200, errors: [404] }, async (c) => getHashBank(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "patch", path: "/hash-banks/:id", summary: "Rename a bank or change its threshold or quality floor", auth: ["admin"], body: "UpdateHashBank", ok: 200, errors: [404, 409] }, async (c, { body }) =>
    updateHashBank(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "delete", path: "/hash-banks/:id", summary: "Delete a bank and every entry it holds", auth: ["admin"], ok: 200, errors: [404] }, async (c) => deleteHashBank(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/entries",
      summary: "Add up to 10,000 entries { hash, tags?, quality? }; a hash already present gains the tags; entries under the quality floor are skipped",
      auth: ["admin"],
      body: "AddHashBankEntries",
      ok: 200,
      errors: [404, 422],
    },
    async (c, { body }) => addHashBankEntries(c.env, c.get("actor"), c.req.param("id"), body.entries, "api"),
  )
  .op({ method: "post", path: "/hash-banks/:id/entries/remove", summary: "Remove up to 10,000 entries by hash", auth: ["admin"], body: "RemoveHashBankEntries", ok: 200, errors: [404] }, async (c, { body }) =>
    removeHashBankEntries(c.env, c.get("actor"), c.req.param("id"), body.hashes),
  )
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/import",
      summary:
        "Import a CSV hash list (text/csv, at most 8 MiB): HMA and python-threatexchange exports (signal_type, signal, tags), ThreatExchange descriptor CSVs (indicator, type, tags), or one hash per line; rows of other signal types are skipped",
      auth: ["admin"],
      consumes: ["text/csv"],
      ok: 200,
      errors: [404, 413, 422],
    },
    async (c) => importHashBankCsv(c.env, c.get("actor"), c.req.param("id"), await c.req.text()),
  )
  .op(
    {
      method: "get",
      path: "/hash-banks/:id/export",
      summary: "Export the bank as CSV (signal_type,signal,tags,quality), streamed; admin only (403 for read keys and viewers); audited",
      auth: ["admin"],
      readOpens: false,
      ok: 200,
      errors: [403, 404],
      produces: "text/csv",
    },
    async (c) => {
      const stream = await exportHashBankCsv(c.env, c.get("actor"), c.req.param("id"));
      return new Response(stream, { headers: { "content-type": "text/csv; charset=utf-8", "content-disposition": `attachment; filename="hash-bank-${c.req.param("id")}.csv"` } });
    },
  )
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/match",
      summary:
        "Match a PDQ hash { hash } (or an image's hash and its dihedral variants { hashes }, with its quality; without one it is under any floor above 0) against the bank: entries within its threshold, nearest first, with distance, tags and an entry reference (the entry's exact hash to admins only)",
      auth: ["admin", "reports:write", "review"],
      body: "MatchHashBank",
      writes: false,
      ok: 200,
      errors: [404],
    },
    async (c, { body }) => {
      const hashes = [...(body.hash ? [body.hash] : []), ...(body.hashes ?? [])];
      if (hashes.length === 0 || hashes.length > 8) throw new AppError("hash_bank.match_invalid", "Send the PDQ hash as hash, or up to 8 hashes (an image's and its dihedral variants) as hashes.", { status: 400 });
      const result = await matchHashBank(c.env, c.get("actor").installationId, c.req.param("id"), { hashes, ...(body.quality === undefined ? {} : { quality: body.quality }) });
      const actor = c.get("actor");
      return { matches: result.matches.map((m) => matchView(actor, m)), threshold: result.bank.threshold, qualityFloor: result.bank.qualityFloor, belowQualityFloor: result.belowQualityFloor };
    },
  );
