// Counting D1 statements in the bench Worker (never in production): every entrypoint of the bench
// Worker — fetch, queue and scheduled handlers, the Workflows entrypoint, the runtime capability
// and the sandbox's WORKFLOWS binding that loaded workers call back into — is handed an env whose
// DB is a thin wrapper around the real binding. The wrapper passes every call through; while a
// tally is open it also counts each statement (one per prepare(…).run/all/first/raw, one per
// statement of a batch, exec's own statement count) and adds up `meta.rows_written` and
// `meta.rows_read` as D1 reports them. Everything runs in the one isolate of the bench Worker
// (Workflows steps and queue consumers included; sandboxed workers have no DB binding and reach D1
// only through the capability), so a module-level tally sees every statement the platform sends.
// /bench routes use the unwrapped binding and are never counted.

interface Tally {
  /** Statements D1 ran (a batch counts each of its statements). */
  queries: number;
  /** Calls to D1: a statement run on its own, a batch, an exec — each one round trip. */
  roundTrips: number;
  rowsWritten: number;
  rowsRead: number;
  /** Statements whose answer carries no meta (raw(), exec()): counted as queries, rows unknown. */
  withoutMeta: number;
}

interface StatementTally extends Tally {
  sql: string;
}

const empty = (): Tally => ({ queries: 0, roundTrips: 0, rowsWritten: 0, rowsRead: 0, withoutMeta: 0 });

const state = {
  open: false,
  total: empty(),
  byEntry: new Map<string, Tally>(),
  bySql: new Map<string, StatementTally>(),
};

/** The statement's text as one line (whitespace collapsed), the key statements are tallied under. */
const normalize = (sql: string) => sql.replace(/\s+/gu, " ").trim();

/**
 * An audit event's insert is tallied by its action as well (the fourth value bound); an insert of
 * several events (auditEventsStatement: the installation, then the list of events, each an array
 * whose third value is the action) by how many it carries and its first event's action, as
 * `[audit ×N first-action…]`; the rest by their text.
 */
const keyOf = (sql: string, values: readonly unknown[]) => {
  const text = normalize(sql);
  if (!text.startsWith("INSERT INTO audit_events")) return text;
  if (text.includes("FROM json_each(?2)") && typeof values[1] === "string") {
    const list = JSON.parse(values[1]) as unknown[][];
    return `[audit ×${list.length} ${String(list[0]?.[2])}…] ${text}`;
  }
  return typeof values[3] === "string" ? `[audit ${values[3]}] ${text}` : text;
};

/** One call to D1 (a statement on its own, a batch, an exec), by entrypoint. */
function noteRoundTrip(entry: string): void {
  if (!state.open) return;
  state.total.roundTrips += 1;
  const perEntry = state.byEntry.get(entry) ?? empty();
  state.byEntry.set(entry, perEntry);
  perEntry.roundTrips += 1;
}

function note(entry: string, sql: string, meta: { rows_written?: number; rows_read?: number } | null, statements = 1, values: readonly unknown[] = []): void {
  if (!state.open) return;
  const key = keyOf(sql, values);
  const perEntry = state.byEntry.get(entry) ?? empty();
  state.byEntry.set(entry, perEntry);
  const perSql = state.bySql.get(key) ?? { ...empty(), sql: key };
  state.bySql.set(key, perSql);
  for (const tally of [state.total, perEntry, perSql]) {
    tally.queries += statements;
    if (meta) {
      tally.rowsWritten += meta.rows_written ?? 0;
      tally.rowsRead += meta.rows_read ?? 0;
    } else tally.withoutMeta += statements;
  }
}

/** Opens a fresh tally (counters reset). */
export function openTally(): void {
  state.open = true;
  state.total = empty();
  state.byEntry.clear();
  state.bySql.clear();
}

/** Closes the tally; answers its totals, by entrypoint, and by statement (most rows written first). */
export function closeTally(): { total: Tally; byEntry: Record<string, Tally>; statements: StatementTally[] } {
  state.open = false;
  const statements = [...state.bySql.values()].sort((a, b) => b.rowsWritten - a.rowsWritten || b.queries - a.queries);
  return { total: state.total, byEntry: Object.fromEntries(state.byEntry), statements };
}

class CountedStatement {
  constructor(
    readonly inner: D1PreparedStatement,
    readonly sql: string,
    readonly entry: string,
    readonly values: readonly unknown[] = [],
  ) {}

  bind(...values: unknown[]): CountedStatement {
    return new CountedStatement(this.inner.bind(...values), this.sql, this.entry, values);
  }

  async run<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const result = await this.inner.run<T>();
    noteRoundTrip(this.entry);
    note(this.entry, this.sql, result.meta, 1, this.values);
    return result;
  }

  async all<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const result = await this.inner.all<T>();
    noteRoundTrip(this.entry);
    note(this.entry, this.sql, result.meta, 1, this.values);
    return result;
  }

  /** While counting, first() is all() and its first row (what D1's first() does), for its meta. */
  async first<T = unknown>(column?: string): Promise<T | null> {
    if (!state.open) return column === undefined ? this.inner.first<T>() : this.inner.first<T>(column);
    const result = await this.inner.all<Record<string, unknown>>();
    noteRoundTrip(this.entry);
    note(this.entry, this.sql, result.meta, 1, this.values);
    const row = result.results[0];
    if (column === undefined) return (row ?? null) as T | null;
    if (row && !(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: ${column}`);
    return (row?.[column] ?? null) as T | null;
  }

  async raw<T = unknown[]>(options?: { columnNames?: boolean }): Promise<T[]> {
    const result = options?.columnNames ? await this.inner.raw<T>({ columnNames: true }) : await this.inner.raw<T>();
    noteRoundTrip(this.entry);
    note(this.entry, this.sql, null, 1, this.values);
    return result as T[];
  }
}

function countedDb(db: D1Database, entry: string): D1Database {
  const unwrap = (statement: D1PreparedStatement) => (statement instanceof CountedStatement ? statement.inner : statement) as D1PreparedStatement;
  const counted = {
    prepare: (sql: string) => new CountedStatement(db.prepare(sql), sql, entry),
    batch: async <T = unknown>(statements: D1PreparedStatement[]) => {
      const results = await db.batch<T>(statements.map(unwrap));
      noteRoundTrip(entry);
      for (const [index, statement] of statements.entries()) {
        if (statement instanceof CountedStatement) note(entry, statement.sql, results[index]?.meta ?? null, 1, statement.values);
        else note(entry, "(a statement prepared elsewhere)", results[index]?.meta ?? null);
      }
      return results;
    },
    exec: async (sql: string) => {
      const result = await db.exec(sql);
      noteRoundTrip(entry);
      note(entry, sql, null, result.count);
      return result;
    },
    dump: () => db.dump(),
    withSession: (constraint?: string) => db.withSession(constraint), // not counted; the platform uses none
  };
  return counted as unknown as D1Database;
}

const envs = new WeakMap<object, Map<string, unknown>>();

/** `env` with its DB counted under `entry`; the same object for the same env and entry, every time. */
export function countedEnv<E extends { DB: D1Database }>(env: E, entry: string): E {
  let byEntry = envs.get(env);
  if (!byEntry) {
    byEntry = new Map();
    envs.set(env, byEntry);
  }
  let wrapped = byEntry.get(entry) as E | undefined;
  if (!wrapped) {
    wrapped = { ...env, DB: countedDb(env.DB, entry) };
    byEntry.set(entry, wrapped);
  }
  return wrapped;
}
