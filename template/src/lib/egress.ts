// Where the platform's own fetch() may go: webhook endpoints, AI provider base URLs, component
// egress hops. A Worker cannot resolve names, so what is checked is what the URL says: IP literals
// in loopback, private, link-local (cloud metadata), shared, reserved or multicast ranges —
// including IPv4 inside IPv6 (mapped, compatible, NAT64, 6to4) and the decimal/octal/hex IPv4
// spellings that URL parsing normalises to dotted quads — and names that mean this machine or a
// metadata service. Loopback and plain http are allowed only when ALLOW_LOCAL_EGRESS is "true"
// (set by npm start, the smoke harness and the bench; off in production).
import { AppError } from "../errors";

export type EgressRefusalReason = "url_invalid" | "scheme_not_allowed" | "credentials_in_url" | "loopback_address" | "private_address" | "metadata_host" | "reserved_address";

export interface EgressRefusal {
  reason: EgressRefusalReason;
  host: string;
  message: string;
}

/** The local-development switch, from the Worker's environment. */
export function allowLocalEgress(env: unknown): boolean {
  return (env as { ALLOW_LOCAL_EGRESS?: unknown } | null)?.ALLOW_LOCAL_EGRESS === "true";
}

const METADATA_NAMES = new Set(["metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com"]);
const PRIVATE_SUFFIXES = [".internal", ".local", ".localdomain", ".home.arpa", ".lan", ".intranet", ".corp"];

type Kind = "public" | "loopback" | "private" | "metadata" | "reserved";

function inV4(a: number, cidr: [number, number, number, number, number]): boolean {
  const [b0, b1, b2, b3, bits] = cidr;
  const base = ((b0 << 24) | (b1 << 16) | (b2 << 8) | b3) >>> 0;
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (a & mask) >>> 0 === (base & mask) >>> 0;
}

const V4_RANGES: Array<[[number, number, number, number, number], Kind]> = [
  [[169, 254, 169, 254, 32], "metadata"],
  [[100, 100, 100, 200, 32], "metadata"], // Alibaba Cloud
  [[127, 0, 0, 0, 8], "loopback"],
  [[0, 0, 0, 0, 8], "reserved"], // "this network"; 0.0.0.0 reaches the local host
  [[10, 0, 0, 0, 8], "private"],
  [[172, 16, 0, 0, 12], "private"],
  [[192, 168, 0, 0, 16], "private"],
  [[100, 64, 0, 0, 10], "private"], // carrier-grade NAT
  [[169, 254, 0, 0, 16], "private"], // link-local
  [[192, 0, 0, 0, 24], "reserved"],
  [[192, 0, 2, 0, 24], "reserved"],
  [[198, 18, 0, 0, 15], "reserved"],
  [[198, 51, 100, 0, 24], "reserved"],
  [[203, 0, 113, 0, 24], "reserved"],
  [[224, 0, 0, 0, 4], "reserved"], // multicast
  [[240, 0, 0, 0, 4], "reserved"], // reserved and broadcast
];

function classifyV4(address: number): Kind {
  for (const [cidr, kind] of V4_RANGES) if (inV4(address, cidr)) return kind;
  return "public";
}

function parseV4(text: string): number | null {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^(?:0|[1-9]\d{0,2})$/u.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((acc, p) => ((acc << 8) | Number(p)) >>> 0, 0);
}

/** Eight 16-bit groups, or null when `text` is not an IPv6 literal. */
function parseV6(text: string): number[] | null {
  let body = text;
  let tail: number[] = [];
  const lastColon = body.lastIndexOf(":");
  if (body.slice(lastColon + 1).includes(".")) {
    const v4 = parseV4(body.slice(lastColon + 1));
    if (v4 === null) return null;
    tail = [v4 >>> 16, v4 & 0xffff];
    body = body.slice(0, lastColon + 1); // keeps a trailing "::"; a single trailing ":" goes
    if (!body.endsWith("::")) body = body.slice(0, -1);
  }
  const halves = body.split("::");
  if (halves.length > 2) return null;
  const read = (part: string) => (part === "" ? [] : part.split(":").map((g) => (/^[0-9a-f]{1,4}$/iu.test(g) ? Number.parseInt(g, 16) : Number.NaN)));
  const head = read(halves[0]!);
  const rest = halves.length === 2 ? read(halves[1]!) : [];
  const given = head.length + rest.length + tail.length;
  if ([...head, ...rest].some(Number.isNaN)) return null;
  if (halves.length === 1 ? given !== 8 : given > 7) return null;
  return [...head, ...Array(8 - given).fill(0), ...rest, ...tail];
}

function classifyV6(g: number[]): Kind {
  const v4 = (hi: number, lo: number) => classifyV4(((g[hi]! << 16) | g[lo]!) >>> 0);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 7) && g[7] === 1) return "loopback";
  if (zeros(0, 8)) return "reserved";
  if (zeros(0, 5) && g[5] === 0xffff) return v4(6, 7); // ::ffff:a.b.c.d (mapped)
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(6, 7); // ::ffff:0:a.b.c.d (translated)
  if (zeros(0, 6)) return v4(6, 7) === "public" ? "reserved" : v4(6, 7); // ::a.b.c.d (compatible, deprecated)
  if (g[0] === 0x64 && g[1] === 0xff9b) return v4(6, 7) === "public" ? "public" : v4(6, 7); // NAT64
  if (g[0] === 0x2002) return v4(1, 2) === "public" ? "public" : v4(1, 2); // 6to4
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zeros(2, 7) && g[7] === 0x254) return "metadata"; // AWS IMDS over IPv6
  if ((g[0]! & 0xfe00) === 0xfc00) return "private"; // unique local
  if ((g[0]! & 0xffc0) === 0xfe80 || (g[0]! & 0xffc0) === 0xfec0) return "private"; // link-local, site-local
  if ((g[0]! & 0xff00) === 0xff00) return "reserved"; // multicast
  if (g[0] === 0x2001 && (g[1] === 0x0db8 || g[1] === 0)) return "reserved"; // documentation, Teredo
  if (g[0] === 0x0100 && zeros(1, 4)) return "reserved"; // discard-only
  return "public";
}

function classifyHost(hostname: string): Kind {
  const host = hostname.toLowerCase().replace(/\.+$/u, "");
  if (host.startsWith("[") && host.endsWith("]")) {
    const groups = parseV6(host.slice(1, -1).split("%")[0]!);
    return groups ? classifyV6(groups) : "reserved";
  }
  const v4 = parseV4(host);
  if (v4 !== null) return classifyV4(v4);
  // A name of digits, hex or dots only is an IPv4 spelling URL parsing would have normalised; a
  // caller that passes one unparsed gets it refused rather than guessed.
  if (/^(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+))*$/iu.test(host)) return "reserved";
  if (host === "localhost" || host.endsWith(".localhost")) return "loopback";
  if (METADATA_NAMES.has(host)) return "metadata";
  if (PRIVATE_SUFFIXES.some((suffix) => host.endsWith(suffix))) return "private";
  return "public";
}

const MESSAGES: Record<Exclude<Kind, "public">, [EgressRefusalReason, string]> = {
  loopback: ["loopback_address", "points at this machine (loopback); allowed only with ALLOW_LOCAL_EGRESS=true for local development"],
  private: ["private_address", "points at a private or link-local network"],
  metadata: ["metadata_host", "points at a cloud metadata service"],
  reserved: ["reserved_address", "points at a reserved, unspecified or multicast address"],
};

/** Why the platform must not fetch `url`, or null when it may. */
export function egressRefusal(url: string | URL, options: { allowLocal: boolean }): EgressRefusal | null {
  let parsed: URL;
  try {
    parsed = typeof url === "string" ? new URL(url) : url;
  } catch {
    return { reason: "url_invalid", host: "", message: "The URL is not an absolute URL." };
  }
  const host = parsed.hostname;
  if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && options.allowLocal)) {
    return { reason: "scheme_not_allowed", host, message: parsed.protocol === "http:" ? "The URL must use https (plain http only with ALLOW_LOCAL_EGRESS=true for local development)." : "The URL must use https." };
  }
  if (parsed.username || parsed.password) return { reason: "credentials_in_url", host, message: "The URL must not carry credentials." };
  const kind = classifyHost(host);
  if (kind === "public" || (kind === "loopback" && options.allowLocal)) return null;
  const [reason, text] = MESSAGES[kind];
  return { reason, host, message: `The URL ${text}.` };
}

/**
 * Throws `code` (an AppError, 422 by default) when the platform must not fetch `url` under this
 * environment; details carry `{ reason, host }`. For AI provider base URLs, webhook endpoints and
 * anything else a tenant names.
 */
export function assertEgressAllowed(url: string | URL, env: unknown, code: string, options: { status?: number; field?: string } = {}): void {
  const refusal = egressRefusal(url, { allowLocal: allowLocalEgress(env) });
  if (!refusal) return;
  const field = options.field ?? "url";
  throw new AppError(code, `${field}: ${refusal.message}`, { status: options.status ?? 422, details: { field, reason: refusal.reason, host: refusal.host } });
}
