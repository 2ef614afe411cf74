// Statements SQLite plans once. The SQLite that D1 runs re-prepares a statement (parses and plans
// it again) each time it is executed with new values when its plan was made "depending on" a bound
// parameter. The planner marks a parameter so when it reads its value while planning: a term
// `column = ?N` that a candidate index does not use (its row estimate asks whether the value is a
// small integer), a parameter it compares with a partial index's condition, or a LIMIT it reads
// to see whether it is a small constant. Most statements over a table with several indexes have
// such a candidate, and each execution then pays for a whole parse and plan: for intake's batch
// about 0.8 ms of the local engine's CPU per report (docs/SCALING.md, "Statements planned once").
//
// Written `+?N`, the parameter is an expression whose value the planner does not read, so the
// plan stands; the comparison, its affinity and the indexes it can use are those of `?N` (unary
// plus changes none of them; the plan tests of the statements that use this hold it).
const COMPARED_PARAMETER = /(==|!=|<>|<=|>=|=|<|>|\bIS\s+NOT\b|\bIS\b|\bLIMIT\b|\bOFFSET\b)(\s*)\?(\d+)\b/giu;

/**
 * Each statement text rewritten so far and its rewrite: most statements are built on every call
 * (the case upsert, an audit insert), and the rewrite scans the whole text. A few hundred texts in
 * all; bounded for a caller that builds texts from varying parts.
 */
const rewritten = new Map<string, string>();
const MAX_REWRITTEN = 1_000;

/**
 * `sql` with each parameter compared on the right of a comparison (`= ?N`, `< ?N`, `IS ?N`…)
 * or given as a LIMIT or OFFSET written `+?N`, an assignment's `SET column = ?N` too (where unary
 * plus is as much a no-op); parameters elsewhere (selected values, function arguments, a
 * parameter on the left of a comparison) are left as they are. For statements written in this
 * codebase only: it does not parse string literals.
 */
export function stablePlanSql(sql: string): string {
  let stable = rewritten.get(sql);
  if (stable === undefined) {
    stable = sql.replace(COMPARED_PARAMETER, "$1$2+?$3");
    if (rewritten.size >= MAX_REWRITTEN) rewritten.clear();
    rewritten.set(sql, stable);
  }
  return stable;
}
