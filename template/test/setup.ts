// Applies the D1 migrations before the tests of each file (as `npm start` does locally).
import { applyD1Migrations, env } from "cloudflare:test";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
