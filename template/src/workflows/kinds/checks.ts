// Small pure checks the kind descriptors compose their config validation from.
import { MAX_WAIT_SECONDS, PORT_PATTERN, type JsonObject, type JsonValue } from "../types";
import type { Problem } from "./descriptor";

export const EVENT_TYPE_PATTERN = /^[A-Za-z0-9._:-]{1,100}$/u;
export const CODE_PATTERN = /^[A-Za-z0-9._:-]{1,100}$/u;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function stringList(value: JsonValue | undefined): string[] {
  return Array.isArray(value) ? value.filter((p): p is string => typeof p === "string") : [];
}

/** A declared list of port names: well-formed, without duplicates. */
export function portList(value: JsonValue | undefined, path: string, problems: Problem[], options: { nonEmpty: boolean }): string[] {
  if (!Array.isArray(value) || (options.nonEmpty && value.length === 0)) {
    problems.push({ path, code: "config_invalid", message: `${path.replace("config.", "")} must be a${options.nonEmpty ? " non-empty" : "n"} array of port names.` });
    return [];
  }
  const seen = new Set<string>();
  value.forEach((port, i) => {
    if (typeof port !== "string" || !PORT_PATTERN.test(port)) problems.push({ path: `${path}[${i}]`, code: "identifier_invalid", message: "A port name must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'." });
    else if (seen.has(port)) problems.push({ path: `${path}[${i}]`, code: "port_duplicate", message: `Port ${port} is declared twice.` });
    else seen.add(port);
  });
  return [...seen];
}

export function requireString(config: JsonObject, key: string, pattern: RegExp, message: string): Problem[] {
  const value = config[key];
  return typeof value !== "string" || !pattern.test(value) ? [{ path: `config.${key}`, code: "config_invalid", message }] : [];
}

export function optionalSeconds(config: JsonObject, key: string): Problem[] {
  const value = config[key];
  if (value === undefined || (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_WAIT_SECONDS)) return [];
  return [{ path: `config.${key}`, code: "config_invalid", message: `${key} must be an integer from 1 to ${MAX_WAIT_SECONDS} (one year).` }];
}

/** A condition's cases as the executor reads them (well-formed entries only). */
export function conditionCases(config: JsonObject): Array<{ port: string; when: string }> {
  const cases = Array.isArray(config.cases) ? config.cases : [];
  return cases.flatMap((entry) => (isRecord(entry) && typeof entry.port === "string" && typeof entry.when === "string" ? [{ port: entry.port, when: entry.when }] : []));
}

export function conditionRules(config: JsonObject): Problem[] {
  const problems: Problem[] = [];
  const casePorts = portList(config.case_ports, "config.case_ports", problems, { nonEmpty: false });
  const fallback = config.default_port;
  if (typeof fallback !== "string" || !PORT_PATTERN.test(fallback)) {
    problems.push({ path: "config.default_port", code: "config_invalid", message: "default_port must be a port name." });
  } else if (casePorts.includes(fallback)) {
    problems.push({ path: "config.default_port", code: "port_duplicate", message: "default_port must differ from every case port." });
  }
  const cases = config.cases;
  if (!Array.isArray(cases)) {
    problems.push({ path: "config.cases", code: "config_invalid", message: "cases must be an array of { port, when }." });
    return problems;
  }
  const covered = new Set<string>();
  cases.forEach((entry, i) => {
    if (!isRecord(entry) || typeof entry.port !== "string" || typeof entry.when !== "string") {
      problems.push({ path: `config.cases[${i}]`, code: "config_invalid", message: "A case is { port, when } with a CEL expression in when." });
    } else if (!casePorts.includes(entry.port)) {
      // Only a well-formed port name is echoed back; anything else is arbitrary user text.
      const named = PORT_PATTERN.test(entry.port) ? `Case port ${entry.port}` : "The case port";
      problems.push({ path: `config.cases[${i}].port`, code: "edge_port_unknown", message: `${named} is not listed in case_ports.` });
    } else if (covered.has(entry.port)) {
      problems.push({ path: `config.cases[${i}].port`, code: "port_duplicate", message: `Port ${entry.port} has two cases.` });
    } else covered.add(entry.port);
  });
  for (const port of casePorts) {
    if (!covered.has(port)) problems.push({ path: "config.case_ports", code: "config_invalid", message: `Case port ${port} has no case.` });
  }
  return problems;
}

/** The longest `pattern` a response schema may hold. */
export const MAX_RESPONSE_PATTERN_LENGTH = 256;

/**
 * Whether a regular expression can backtrack exponentially: a quantified group (`*`, `+`, `{n,}`)
 * that itself holds a quantifier or an alternation, as in `(a+)+` or `(a|aa)*`. A response
 * schema's patterns run on JavaScript's backtracking RegExp over reviewers' input, so such
 * patterns are refused at publish.
 */
export function hasNestedQuantifier(pattern: string): boolean {
  const groups: boolean[] = [];
  let risky = false;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "\\") {
      i++;
      continue;
    }
    if (ch === "[") {
      // A character class: skip to its end (a `]` right after `[` or `[^` is literal).
      i++;
      if (pattern[i] === "^") i++;
      if (pattern[i] === "]") i++;
      while (i < pattern.length && pattern[i] !== "]") i += pattern[i] === "\\" ? 2 : 1;
      continue;
    }
    if (ch === "(") groups.push(false);
    else if (ch === "|" || ch === "*" || ch === "+" || ch === "{") {
      if (groups.length > 0) groups[groups.length - 1] = true;
    } else if (ch === ")") {
      const inner = groups.pop() ?? false;
      const next = pattern[i + 1];
      const quantified = next === "*" || next === "+" || (next === "{" && /^\{\d+,\d*\}/u.test(pattern.slice(i + 1)) && !/^\{(\d+),\1\}/u.test(pattern.slice(i + 1)));
      if (inner && quantified) risky = true;
      // The group, quantified or not, is a quantifier-bearing part of its parent.
      if (groups.length > 0 && (inner || quantified)) groups[groups.length - 1] = true;
    }
  }
  return risky;
}

/** Problems of the `pattern`s (and `patternProperties` keys) anywhere in a response schema. */
export function responsePatternProblems(schema: unknown, path = "config.response_schema"): Problem[] {
  const problems: Problem[] = [];
  const check = (pattern: string, at: string) => {
    if (pattern.length > MAX_RESPONSE_PATTERN_LENGTH) problems.push({ path: at, code: "pattern_too_long", message: `A response schema's pattern may be at most ${MAX_RESPONSE_PATTERN_LENGTH} characters.` });
    else if (hasNestedQuantifier(pattern))
      problems.push({
        path: at,
        code: "pattern_unsafe",
        message: "This pattern repeats a group that itself repeats or alternates (as (a+)+ or (a|b)*): it can take exponential time on a reviewer's input. Write it without the nested repetition.",
      });
  };
  const walk = (value: unknown, at: string) => {
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) walk(item, `${at}[${index}]`);
    } else if (isRecord(value)) {
      for (const [key, child] of Object.entries(value)) {
        if (key === "pattern" && typeof child === "string") check(child, `${at}.pattern`);
        if (key === "patternProperties" && isRecord(child)) for (const name of Object.keys(child)) check(name, `${at}.patternProperties`);
        walk(child, `${at}.${key}`);
      }
    }
  };
  walk(schema, path);
  return problems;
}
