// Counting an invocation's D1 queries. Workers Paid allows 1,000 D1 queries per invocation (a
// batch counts each of its statements), so the schedule, which runs every sweep in one scheduled
// invocation and repeats those with a backlog, counts what it has used and starts a further slice
// only while one as large as the sweep's largest so far still fits. The count is kept by a thin
// wrapper around the D1 binding: every statement prepared through it is counted when it runs.

export interface QueryCount {
  queries: number;
}

/** `db` with every statement run through it counted in `count` (run, all, first, raw; each statement of a batch). */
export function countingD1(db: D1Database, count: QueryCount): D1Database {
  const originals = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, property) {
        if (property === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        if (property === "run" || property === "all" || property === "first" || property === "raw") {
          return (...args: unknown[]) => {
            count.queries += 1;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return value.bind(target);
      },
    });
    originals.set(proxy, statement);
    return proxy;
  };
  return new Proxy(db, {
    get(target, property) {
      if (property === "prepare") return (sql: string) => wrap(target.prepare(sql));
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) => {
          count.queries += statements.length;
          // The binding's batch takes its own statements, not the wrappers.
          return target.batch(statements.map((statement) => originals.get(statement) ?? statement));
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
