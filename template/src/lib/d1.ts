// D1 error predicates and the one way to guard a statement on a row written earlier in a batch.

/** A D1 write refused by a UNIQUE (or primary key) constraint (SQLite's "UNIQUE constraint failed: …"). */
export function isUniqueViolation(error: unknown): boolean {
  return String(error).includes("UNIQUE constraint failed");
}

/**
 * "Only if this row exists by now in the batch, with these column values": the WHERE clause an
 * `INSERT … SELECT` carries so that a batch whose guarded write did nothing records nothing.
 * Table and column names are checked identifiers; values are bound from `firstParam` on.
 */
export interface RowGuard {
  table: string;
  /** The row's `id`; a table keyed otherwise names its key's columns in `where` instead. */
  id?: string;
  where?: Record<string, string | number | null>;
}

const IDENTIFIER = /^[a-z][a-z_]*$/u;

/**
 * `idSql`: the row's id as SQL of the enclosing statement instead of a bound `id` (a column of the
 * rows an `INSERT … SELECT` writes, so each row it writes is guarded by a row of its own).
 */
export function rowGuardClause(guard: RowGuard, firstParam: number, idSql?: string): { sql: string; binds: (string | number | null)[] } {
  const columns = Object.keys(guard.where ?? {});
  if (![guard.table, ...columns].every((name) => IDENTIFIER.test(name))) throw new Error("row_guard_identifier_invalid");
  const byId = guard.id !== undefined;
  const first = byId ? firstParam + 1 : firstParam;
  // Columns are qualified by their table: inside a statement over another table (an audit insert
  // that selects from its own rows), a column the guard's table lacks fails to prepare instead of
  // binding to the outer statement's column of that name.
  const conditions = [...(byId ? [`${guard.table}.id = ?${firstParam}`] : idSql !== undefined ? [`${guard.table}.id = ${idSql}`] : []), ...columns.map((column, index) => `${guard.table}.${column} = ?${first + index}`)];
  if (conditions.length === 0) throw new Error("row_guard_empty");
  return {
    sql: `WHERE EXISTS (SELECT 1 FROM ${guard.table} WHERE ${conditions.join(" AND ")})`,
    binds: [...(byId ? [guard.id!] : []), ...columns.map((column) => guard.where![column]!)],
  };
}
