// Hono environment shared by every router.
import type { Actor } from "../auth";

/** `requestId`: the `cf-ray` of the request, or a generated id (logged, and answered as `x-request-id`). */
export type AppEnv = { Bindings: Env; Variables: { actor: Actor; requestId: string } };
