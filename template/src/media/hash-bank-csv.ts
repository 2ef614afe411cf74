// Hash lists as CSV, the way hash-sharing tools pass them around. Import reads:
//   - a header row naming the columns (any order, case-insensitive): the hash in `signal`, `hash`,
//     `indicator`, `signal_value` or `pdq`; its type in `signal_type`, `type` or `indicator_type`
//     (rows of a type other than PDQ — `pdq`, `hash_pdq`, `pdq_photo` — are skipped and counted);
//     tags in `tags`, `labels` or `collab_tags`; quality in `quality`. This reads HMA's and
//     python-threatexchange's exports (signal_type, signal, …) and ThreatExchange descriptor CSVs
//     (indicator, type, tags);
//   - or no header: `pdq,<hash>[,<tags>]` or `<hash>[,<tags>]` per line.
// Tags within a field are separated by spaces, commas, semicolons or pipes. Export writes
// `signal_type,signal,tags,quality`, which import reads back.
import { AppError } from "../errors";
import type { BankEntry } from "./hash-banks";
import { MAX_TAG_LENGTH, MAX_TAGS } from "./pdq-index-shard";

const HASH = /^[0-9A-Fa-f]{64}$/u;
const HASH_COLUMNS = ["signal", "hash", "indicator", "signal_value", "pdq"];
const TYPE_COLUMNS = ["signal_type", "type", "indicator_type"];
const TAG_COLUMNS = ["tags", "labels", "collab_tags"];
const PDQ_TYPES = new Set(["pdq", "hash_pdq", "pdq_photo", "photo_pdq"]);
/** Lines one import reads at most (the body is at most 8 MiB: about 100,000 rows). */
export const MAX_CSV_ROWS = 200_000;

/** Splits one CSV line (RFC 4180 quotes; a quoted field may not span lines here). */
function fields(line: string): string[] {
  const out: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < line.length; i += 1) {
    const ch = line[i]!;
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      out.push(field);
      field = "";
    } else field += ch;
  }
  out.push(field);
  return out.map((f) => f.trim());
}

const tagsOf = (field: string | undefined) => (field ? field.split(/[\s,;|]+/u).filter(Boolean) : []);

export interface CsvImport {
  entries: BankEntry[];
  /** Rows of another signal type than PDQ. */
  otherTypes: number;
  /** Rows whose hash is not 64 hex digits, with their line numbers (the first 20). */
  invalid: number;
  invalidLines: number[];
}

/**
 * Parses a CSV hash list; 422 hash_bank.csv_too_long past MAX_CSV_ROWS, 422
 * hash_bank.csv_tags_invalid when a row has more than MAX_TAGS tags or one past MAX_TAG_LENGTH
 * characters (the limits the JSON API's schema sets).
 */
export function parseHashCsv(text: string): CsvImport {
  const lines = text.split(/\r?\n/u);
  if (lines.length > MAX_CSV_ROWS + 1) throw new AppError("hash_bank.csv_too_long", `A CSV import may have at most ${MAX_CSV_ROWS} rows; split the file.`, { status: 422 });
  const first = fields(lines[0] ?? "").map((f) => f.toLowerCase());
  const header = first.some((f) => HASH_COLUMNS.includes(f)) && !first.some((f) => HASH.test(f));
  const at = (names: string[]) => first.findIndex((f) => names.includes(f));
  const columns = header ? { hash: at(HASH_COLUMNS), type: at(TYPE_COLUMNS), tags: at(TAG_COLUMNS), quality: at(["quality"]) } : null;
  const out: CsvImport = { entries: [], otherTypes: 0, invalid: 0, invalidLines: [] };
  for (let n = header ? 1 : 0; n < lines.length; n += 1) {
    const line = lines[n]!;
    if (line.trim() === "" || line.startsWith("#")) continue;
    const row = fields(line);
    let hash: string | undefined;
    let type: string | undefined;
    let tags: string | undefined;
    let quality: string | undefined;
    if (columns) {
      hash = row[columns.hash];
      type = columns.type >= 0 ? row[columns.type] : undefined;
      tags = columns.tags >= 0 ? row[columns.tags] : undefined;
      quality = columns.quality >= 0 ? row[columns.quality] : undefined;
    } else if (row.length >= 2 && !HASH.test(row[0]!)) {
      [type, hash, tags] = row;
    } else {
      [hash, tags] = row;
    }
    if (type !== undefined && type !== "" && !PDQ_TYPES.has(type.toLowerCase())) {
      out.otherTypes += 1;
      continue;
    }
    if (!hash || !HASH.test(hash)) {
      out.invalid += 1;
      if (out.invalidLines.length < 20) out.invalidLines.push(n + 1);
      continue;
    }
    const rowTags = [...new Set(tagsOf(tags))];
    if (rowTags.length > MAX_TAGS || rowTags.some((t) => t.length > MAX_TAG_LENGTH)) {
      throw new AppError("hash_bank.csv_tags_invalid", `Line ${n + 1} has more than ${MAX_TAGS} tags or a tag longer than ${MAX_TAG_LENGTH} characters; shorten its tags. Nothing was imported.`, {
        status: 422,
        details: { line: n + 1 },
      });
    }
    const q = quality !== undefined && /^\d{1,3}$/u.test(quality) ? Math.min(100, Number(quality)) : undefined;
    out.entries.push({ hash: hash.toLowerCase(), tags: rowTags, ...(q === undefined ? {} : { quality: q }) });
  }
  return out;
}

const csvField = (value: string) => (/[",\r\n]/u.test(value) ? `"${value.replace(/"/gu, '""')}"` : value);

export const CSV_HEADER = "signal_type,signal,tags,quality\n";

export function csvRow(entry: { hash: string; tags: string[]; quality: number | null }): string {
  return `pdq,${entry.hash},${csvField(entry.tags.join(" "))},${entry.quality ?? ""}\n`;
}
