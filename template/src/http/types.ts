// Hono environment shared by every router.
import type { Actor } from "../auth";

/**
 * `requestId`: the `cf-ray` of the request, or a generated id (logged, and answered as `x-request-id`).
 * `writesNothing`: set by an operation declared `writes: false` (a POST that only computes, such as
 * a hash match), so no audit seal is scheduled after it.
 * `route`: the published path of an operation the router matched by another pattern (route.ts
 * `routerPath`), for the request log.
 */
export type AppEnv = { Bindings: Env; Variables: { actor: Actor; requestId: string; writesNothing?: boolean; route?: string } };
