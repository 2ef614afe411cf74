// The pattern parser of lib/linear-regex: reads an RE2-subset pattern into an AST (sets of code
// point ranges, assertions, concatenation, alternation, bounded repetition), with the character
// classes, escapes and flag groups it understands. It refuses what the matcher cannot run in
// linear time (backreferences, lookaround) and what RE2 refuses (POSIX classes, bad repetition).
// Compilation to a program and matching live in linear-regex.ts.

const MAX_REPEAT = 1_000;

export class PatternError extends Error {}

export type Assertion = "bol" | "eol" | "bot" | "eot" | "word" | "not_word";
export type Range = readonly [number, number];
export interface CharSet {
  ranges: Range[];
  negated: boolean;
  fold: boolean;
}
export type Node = { t: "set"; set: CharSet } | { t: "assert"; kind: Assertion } | { t: "cat"; items: Node[] } | { t: "alt"; items: Node[] } | { t: "rep"; item: Node; min: number; max: number } | { t: "empty" };

interface Flags {
  i: boolean;
  s: boolean;
  m: boolean;
}

const DIGIT: Range[] = [[48, 57]];
const WORD: Range[] = [
  [48, 57],
  [65, 90],
  [95, 95],
  [97, 122],
];
const SPACE: Range[] = [
  [9, 10],
  [12, 13],
  [32, 32],
];
const MAX_CP = 0x10ffff;

function invert(ranges: Range[]): Range[] {
  const sorted = [...ranges].sort((x, y) => x[0] - y[0]);
  const out: Range[] = [];
  let next = 0;
  for (const [lo, hi] of sorted) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= MAX_CP) out.push([next, MAX_CP]);
  return out;
}

const PERL_CLASSES: Record<string, Range[]> = { d: DIGIT, D: invert(DIGIT), w: WORD, W: invert(WORD), s: SPACE, S: invert(SPACE) };
const SIMPLE_ESCAPES: Record<string, number> = { n: 10, t: 9, r: 13, f: 12, v: 11, a: 7 };

export class Parser {
  private pos = 0;
  constructor(private readonly src: string) {}

  parse(): Node {
    const node = this.alternation({ i: false, s: false, m: false });
    if (this.pos < this.src.length) throw new PatternError(`unexpected ')' at ${this.pos}`);
    return node;
  }

  private peek(): string | undefined {
    return this.src[this.pos];
  }

  private alternation(flags: Flags): Node {
    const items = [this.concat(flags)];
    while (this.peek() === "|") {
      this.pos++;
      items.push(this.concat(flags));
    }
    return items.length === 1 ? items[0]! : { t: "alt", items };
  }

  private concat(flags: Flags): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || c === ")") break;
      // A flag group `(?i)` changes the flags for the rest of the enclosing group.
      const atom = this.atom(flags);
      if (atom === null) continue;
      items.push(this.quantified(atom));
    }
    return items.length === 1 ? items[0]! : items.length === 0 ? { t: "empty" } : { t: "cat", items };
  }

  private quantified(atom: Node): Node {
    let node = atom;
    let quantified = false;
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number;
      if (c === "*") [min, max] = [0, Infinity];
      else if (c === "+") [min, max] = [1, Infinity];
      else if (c === "?") [min, max] = [0, 1];
      else if (c === "{") {
        const counted = /^\{(\d+)(,(\d*))?\}/u.exec(this.src.slice(this.pos));
        if (!counted) return node; // RE2 reads a `{` that starts no repetition as a literal
        min = Number(counted[1]);
        max = counted[2] === undefined ? min : counted[3] === "" ? Infinity : Number(counted[3]);
        if (min > MAX_REPEAT || (max !== Infinity && (max > MAX_REPEAT || max < min))) throw new PatternError(`bad repetition {${counted[1]}${counted[2] ?? ""}}`);
        this.pos += counted[0].length - 1;
      } else return node;
      if (quantified) throw new PatternError(`bad repetition operator at ${this.pos}`);
      this.pos++;
      if (this.peek() === "?") this.pos++; // lazy: the same language, and matches() only asks whether
      node = { t: "rep", item: node, min, max };
      quantified = true;
    }
  }

  private atom(flags: Flags): Node | null {
    const c = this.src[this.pos++]!;
    switch (c) {
      case "(":
        return this.group(flags);
      case "[":
        return { t: "set", set: this.charClass(flags) };
      case ".":
        return {
          t: "set",
          set: {
            ranges: flags.s
              ? [[0, MAX_CP]]
              : [
                  [0, 9],
                  [11, MAX_CP],
                ],
            negated: false,
            fold: false,
          },
        };
      case "^":
        return { t: "assert", kind: flags.m ? "bol" : "bot" };
      case "$":
        return { t: "assert", kind: flags.m ? "eol" : "eot" };
      case "*":
      case "+":
      case "?":
        throw new PatternError(`missing argument to repetition operator ${c}`);
      case "\\":
        return this.escape(flags);
      default: {
        const cp = this.src.codePointAt(this.pos - 1)!;
        if (cp > 0xffff) this.pos++;
        return { t: "set", set: { ranges: [[cp, cp]], negated: false, fold: flags.i } };
      }
    }
  }

  private group(flags: Flags): Node | null {
    let inner = flags;
    if (this.peek() === "?") {
      const rest = this.src.slice(this.pos + 1);
      if (/^(?:[=!]|<[=!])/u.test(rest)) throw new PatternError("lookaround is not supported (it needs backtracking)");
      const named = /^(?:P?<[A-Za-z_][A-Za-z0-9_]*>)/u.exec(rest);
      if (named) this.pos += 1 + named[0].length;
      else {
        const flagGroup = /^([ims]*)(?:-([ims]*))?([:)])/u.exec(rest);
        if (!flagGroup || (flagGroup[1] === "" && flagGroup[2] === undefined && flagGroup[3] === ")")) throw new PatternError(`unsupported group syntax at ${this.pos}`);
        const next = { ...flags };
        for (const f of flagGroup[1]!) next[f as keyof Flags] = true;
        for (const f of flagGroup[2] ?? "") next[f as keyof Flags] = false;
        this.pos += 1 + flagGroup[0].length;
        if (flagGroup[3] === ")") {
          Object.assign(flags, next); // `(?i)`: for the rest of the enclosing group
          return null;
        }
        inner = next;
      }
    }
    const node = this.alternation({ ...inner });
    if (this.src[this.pos++] !== ")") throw new PatternError("missing closing )");
    return node;
  }

  private escape(flags: Flags): Node {
    const c = this.src[this.pos++];
    if (c === undefined) throw new PatternError("trailing backslash");
    if (c === "b") return { t: "assert", kind: "word" };
    if (c === "B") return { t: "assert", kind: "not_word" };
    if (c === "A") return { t: "assert", kind: "bot" };
    if (c === "z") return { t: "assert", kind: "eot" };
    const perl = PERL_CLASSES[c];
    if (perl) return { t: "set", set: { ranges: perl, negated: false, fold: false } };
    const cp = this.escapedCodePoint(c);
    return { t: "set", set: { ranges: [[cp, cp]], negated: false, fold: flags.i } };
  }

  /** A single escaped character (outside or inside a class); `c` is the character after `\`. */
  private escapedCodePoint(c: string): number {
    if (c >= "1" && c <= "9") throw new PatternError("backreferences are not supported (they need backtracking)");
    if (c === "0") return 0;
    const simple = SIMPLE_ESCAPES[c];
    if (simple !== undefined) return simple;
    if (c === "x") {
      const hex = /^(?:\{([0-9A-Fa-f]{1,6})\}|([0-9A-Fa-f]{2}))/u.exec(this.src.slice(this.pos));
      if (!hex) throw new PatternError("invalid \\x escape");
      this.pos += hex[0].length;
      const cp = Number.parseInt(hex[1] ?? hex[2]!, 16);
      if (cp > MAX_CP) throw new PatternError("invalid \\x escape");
      return cp;
    }
    if (/[A-Za-z0-9]/u.test(c)) throw new PatternError(`unsupported escape \\${c}`);
    return c.codePointAt(0)!;
  }

  private charClass(flags: Flags): CharSet {
    const set: CharSet = { ranges: [], negated: false, fold: flags.i };
    if (this.peek() === "^") {
      set.negated = true;
      this.pos++;
    }
    let first = true;
    for (;;) {
      const c = this.src[this.pos++];
      if (c === undefined) throw new PatternError("missing closing ]");
      if (c === "]" && !first) return set;
      first = false;
      if (c === "[" && this.peek() === ":") throw new PatternError("POSIX classes are not supported; use \\d, \\w, \\s or ranges");
      let lo: number;
      if (c === "\\") {
        const e = this.src[this.pos++];
        if (e === undefined) throw new PatternError("trailing backslash");
        const perl = PERL_CLASSES[e];
        if (perl) {
          set.ranges.push(...perl);
          continue;
        }
        lo = this.escapedCodePoint(e);
      } else {
        lo = this.src.codePointAt(this.pos - 1)!;
        if (lo > 0xffff) this.pos++;
      }
      let hi = lo;
      if (this.peek() === "-" && this.src[this.pos + 1] !== "]" && this.src[this.pos + 1] !== undefined) {
        this.pos++;
        const h = this.src[this.pos++]!;
        if (h === "\\") hi = this.escapedCodePoint(this.src[this.pos++] ?? "");
        else {
          hi = this.src.codePointAt(this.pos - 1)!;
          if (hi > 0xffff) this.pos++;
        }
        if (hi < lo) throw new PatternError("invalid character class range");
      }
      set.ranges.push([lo, hi]);
    }
  }
}
