// One error type for the whole platform: a stable string code, an HTTP status, optional details.

export interface ErrorDetail {
  path: string;
  code: string;
  message: string;
}

/**
 * An error with a stable `code`. Match on `code`, never on `instanceof`: classes do not survive
 * RPC or Worker Loader boundaries, so errors crossing them carry the code as their message.
 * Messages never carry user content or secrets.
 */
export class AppError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details?: unknown;
  readonly retryable: boolean;

  constructor(code: string, message: string, options: { status?: number; details?: unknown; retryable?: boolean } = {}) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.status = options.status ?? 400;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
  }
}

export function notFound(resource: string): AppError {
  return new AppError(`${resource}.not_found`, `The ${resource.replace(/_/gu, " ")} does not exist.`, { status: 404 });
}

export function conflict(code: string, message: string, details?: unknown): AppError {
  return new AppError(code, message, { status: 409, details });
}

/** The code of any thrown value: an AppError's code, or the bare code an error carried across RPC. */
export function errorCode(error: unknown): string {
  if (error instanceof AppError) return error.code;
  const message = error instanceof Error ? error.message.replace(/^(?:[A-Za-z]*Error: )+/u, "").replace(/^retryable:/u, "") : "";
  return /^[a-z][a-z0-9_.]{0,99}$/u.test(message) ? message : "internal.error";
}
