// The test's env whose D1 binding tells a watcher of every round trip it sends: the SQL of each
// statement in it (a batch's in order) and whether it was a batch. The watcher is told once the
// trip is answered, before the caller gets the answer (a test can act in between: a racing writer).
import { env } from "cloudflare:test";

export interface D1Trip {
  /** The SQL of each statement sent, in order ("?" for one not prepared through this binding). */
  sqls: string[];
  batch: boolean;
}

export function watchedEnv(watch: (trip: D1Trip) => Promise<void> | void): typeof env {
  const sqlOf = new WeakMap<object, string>();
  const answered = async <T>(trip: D1Trip, run: () => Promise<T>): Promise<T> => {
    const answer = await run();
    await watch(trip);
    return answer;
  };
  const db = new Proxy(env.DB, {
    get(target, property) {
      if (property === "batch") return (statements: D1PreparedStatement[]) => answered({ sqls: statements.map((s) => sqlOf.get(s) ?? "?"), batch: true }, () => target.batch(statements));
      if (property !== "prepare") {
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      }
      // A statement's SQL is known at prepare; it is told when bound and run, or sent in a batch.
      return (sql: string) => {
        const statement = target.prepare(sql);
        return new Proxy(statement, {
          get(s, p) {
            const v = Reflect.get(s, p, s);
            if (p !== "bind") return typeof v === "function" ? v.bind(s) : v;
            return (...args: unknown[]) => {
              const bound = s.bind(...args);
              const proxy = new Proxy(bound, {
                get(b, q) {
                  const w = Reflect.get(b, q, b);
                  if (q === "all" || q === "first" || q === "run" || q === "raw") return (...rest: unknown[]) => answered({ sqls: [sql], batch: false }, () => (w as (...a: unknown[]) => Promise<unknown>).apply(b, rest));
                  return typeof w === "function" ? w.bind(b) : w;
                },
              });
              sqlOf.set(proxy, sql);
              return proxy;
            };
          },
        });
      };
    },
  });
  return { ...env, DB: db } as typeof env;
}
