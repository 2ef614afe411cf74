// Hono environment shared by every router.
import type { Actor } from "../auth";

export type AppEnv = { Bindings: Env; Variables: { actor: Actor } };
