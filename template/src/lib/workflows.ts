// Cloudflare Workflows error predicates (the binding reports these only as messages).
function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `create()` found an instance with that id already: a replayed dispatch, which is a success. */
export function isInstanceAlreadyExists(error: unknown): boolean {
  return /already exists|already_exists|duplicate/iu.test(message(error));
}

/** `terminate()` found no live instance: never started, gone, or already finished. */
export function isInstanceNotLive(error: unknown): boolean {
  return /not found|not_found|already|complete|errored|terminated/iu.test(message(error));
}
