// The preserved copy of each file a CyberTipline report carries: fetched once from where the
// report's evidence says it is (through the egress checks), checked against the evidence's SHA-256
// when it has one, sealed under the installation's key and kept in R2 under a key derived from
// the submission's id. Uploads to NCMEC are made from this copy, so a resumed submission sends
// the very bytes that were confirmed; and the copy is what stays preserved for the hold's year.
import { openPersonalData, sealPersonalData } from "../../cases";
import { AppError } from "../../errors";
import { sha256Hex } from "../../lib/crypto";
import { assertEgressAllowed } from "../../lib/egress";
import { hashImage } from "../../media";

/** The largest file preserved and uploaded (the media hashing limit). */
export const MAX_FILE_BYTES = 8 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 15_000;

export const evidenceKey = (installationId: string, submissionId: string, index: number) => `cybertipline/${installationId}/${submissionId}/file-${index}`;
const context = (submissionId: string, index: number) => `cybertipline:${submissionId}:file-${index}`;

interface SealedFile {
  contentType: string;
  base64: string;
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * Fetches a file the evidence names and keeps it sealed; returns its SHA-256. A copy already kept
 * under this key (a repeated call for the same submission) is used as it is. 422
 * `cybertipline.file_unavailable` when it cannot be fetched, `cybertipline.file_mismatch` when its
 * bytes are not the ones the evidence's hash names, `cybertipline.file_too_large` above the limit.
 */
export async function preserveFile(env: Env, input: { installationId: string; submissionId: string; index: number; url: string; sha256: string | null }): Promise<{ sha256: string; bytes: number; pdq: string | null }> {
  const key = evidenceKey(input.installationId, input.submissionId, input.index);
  const kept = await env.WORKFLOW_ARTIFACTS.head(key);
  if (kept?.customMetadata?.sha256) return { sha256: kept.customMetadata.sha256, bytes: Number(kept.customMetadata.bytes ?? 0), pdq: kept.customMetadata.pdq || null };
  assertEgressAllowed(input.url, env, "cybertipline.file_url_not_allowed", { field: `evidence[${input.index}].url` });
  let response: Response;
  try {
    response = await fetch(input.url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: "manual" });
  } catch {
    throw new AppError("cybertipline.file_unavailable", `The file of evidence ${input.index} could not be fetched; it is needed for the report.`, { status: 503, retryable: true });
  }
  if (!response.ok) throw new AppError("cybertipline.file_unavailable", `The file of evidence ${input.index} answered ${response.status}; it is needed for the report.`, { status: 503, retryable: true });
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes.length > MAX_FILE_BYTES) throw new AppError("cybertipline.file_too_large", `The file of evidence ${input.index} is larger than ${MAX_FILE_BYTES} bytes.`, { status: 422 });
  const sha256 = await sha256Hex(bytes);
  if (input.sha256 && input.sha256 !== sha256) {
    throw new AppError("cybertipline.file_mismatch", `The file of evidence ${input.index} is not the one its sha256 names; the report carries only files that were confirmed.`, { status: 422 });
  }
  const sealed = await sealPersonalData(
    env,
    input.installationId,
    context(input.submissionId, input.index),
    { contentType: response.headers.get("content-type") ?? "application/octet-stream", base64: toBase64(bytes) } satisfies SealedFile,
    {
      scope: "installation",
    },
  );
  // PDQ of the preserved bytes themselves (never a hash a client claimed), when they are an image the hasher reads.
  const pdq = await hashImage(response.headers.get("content-type") ?? undefined, bytes).then(
    (hashes) => hashes.pdq.hash,
    () => null,
  );
  await env.WORKFLOW_ARTIFACTS.put(key, sealed.sealed, { customMetadata: { sha256, bytes: String(bytes.length), pdq: pdq ?? "" } });
  return { sha256, bytes: bytes.length, pdq };
}

/** The preserved file, opened (callers audit the read); null when it is gone (released and erased). */
export async function openPreservedFile(env: Env, installationId: string, submissionId: string, index: number): Promise<{ contentType: string; bytes: Uint8Array } | null> {
  const object = await env.WORKFLOW_ARTIFACTS.get(evidenceKey(installationId, submissionId, index));
  if (!object) return null;
  const file = await openPersonalData<SealedFile>(env, installationId, context(submissionId, index), await object.text());
  return { contentType: file.contentType, bytes: fromBase64(file.base64) };
}

/** Erases a submission's preserved files (after its hold ended); idempotent. */
export async function erasePreservedFiles(env: Env, installationId: string, submissionId: string, count: number): Promise<void> {
  const keys = Array.from({ length: count }, (_, i) => evidenceKey(installationId, submissionId, i));
  if (keys.length > 0) await env.WORKFLOW_ARTIFACTS.delete(keys);
}
