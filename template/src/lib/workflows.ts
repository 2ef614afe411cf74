// Cloudflare Workflows error predicates (the binding reports these only as messages).

/** `create()` found an instance with that id already: a replayed dispatch, which is a success. */
export function isInstanceAlreadyExists(error: unknown): boolean {
  return /already exists|already_exists|duplicate/iu.test(String(error));
}

/** `terminate()` found no live instance: never started, gone, or already finished. */
export function isInstanceNotLive(error: unknown): boolean {
  return /not found|not_found|already|complete|errored|terminated/iu.test(String(error));
}

/**
 * `create()` was refused for the creation rate (Workflows creates about 100 instances a second per
 * workflow) or because the service is overloaded: the run waits and tries again, it has not failed.
 */
export function isCreateRateLimited(error: unknown): boolean {
  return /rate.?limit|too many|429|overload|throttl|capacity|try again later/iu.test(String(error));
}
