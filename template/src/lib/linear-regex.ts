// A linear-time regular expression matcher for CEL's `matches()` (an RE2-like subset).
// Patterns compile to a Thompson NFA that is simulated one code point at a time with a set of
// live states (no backtracking), so a search costs O(subject length × program size) whatever
// the pattern. Constructs that need backtracking (backreferences, lookaround) are refused, as
// RE2 refuses them. No code generation: the program is data.

export const MAX_PATTERN_LENGTH = 1_024;
/** Instructions in one compiled program; counted repetition expands, so this bounds `a{1000}{1000}`. */
export const MAX_PROGRAM_SIZE = 2_000;
const MAX_REPEAT = 1_000;

export class PatternError extends Error {}

type Assertion = "bol" | "eol" | "bot" | "eot" | "word" | "not_word";
type Range = readonly [number, number];
interface CharSet {
  ranges: Range[];
  negated: boolean;
  fold: boolean;
}
type Inst = { op: "char"; set: CharSet; next: number } | { op: "split"; a: number; b: number } | { op: "jmp"; to: number } | { op: "assert"; kind: Assertion; next: number } | { op: "match" };

type Node = { t: "set"; set: CharSet } | { t: "assert"; kind: Assertion } | { t: "cat"; items: Node[] } | { t: "alt"; items: Node[] } | { t: "rep"; item: Node; min: number; max: number } | { t: "empty" };

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

class Parser {
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

class Compiler {
  readonly prog: Inst[] = [];

  private emit(inst: Inst): number {
    if (this.prog.length >= MAX_PROGRAM_SIZE) throw new PatternError(`the pattern compiles to more than ${MAX_PROGRAM_SIZE} instructions`);
    this.prog.push(inst);
    return this.prog.length - 1;
  }

  /** Emits `node` so that it continues at the returned list of holes to patch. */
  private patch(holes: Array<(to: number) => void>, to: number): void {
    for (const hole of holes) hole(to);
  }

  compile(node: Node): Array<(to: number) => void> {
    switch (node.t) {
      case "empty":
        return [];
      case "set": {
        const inst: Inst = { op: "char", set: node.set, next: -1 };
        this.emit(inst);
        return [(to) => (inst.next = to)];
      }
      case "assert": {
        const inst: Inst = { op: "assert", kind: node.kind, next: -1 };
        this.emit(inst);
        return [(to) => (inst.next = to)];
      }
      case "cat": {
        let holes: Array<(to: number) => void> = [];
        for (const item of node.items) {
          const start = this.prog.length;
          const next = this.compile(item);
          this.patch(holes, start);
          holes = next;
        }
        return holes;
      }
      case "alt": {
        const out: Array<(to: number) => void> = [];
        let pendingSplit: Extract<Inst, { op: "split" }> | null = null;
        node.items.forEach((item, index) => {
          const isLast = index === node.items.length - 1;
          let split: Extract<Inst, { op: "split" }> | null = null;
          if (!isLast) {
            split = { op: "split", a: -1, b: -1 };
            const at = this.emit(split);
            if (pendingSplit) pendingSplit.b = at;
          } else if (pendingSplit) pendingSplit.b = this.prog.length;
          if (split) split.a = this.prog.length;
          out.push(...this.compile(item));
          const jmp: Inst = { op: "jmp", to: -1 };
          if (!isLast) {
            this.emit(jmp);
            out.push((to) => (jmp.to = to));
          }
          pendingSplit = split;
        });
        return out;
      }
      case "rep":
        return this.repeat(node.item, node.min, node.max);
    }
  }

  private repeat(item: Node, min: number, max: number): Array<(to: number) => void> {
    let holes: Array<(to: number) => void> = [];
    const chain = (compileOne: () => Array<(to: number) => void>) => {
      const start = this.prog.length;
      const next = compileOne();
      this.patch(holes, start);
      holes = next;
    };
    for (let i = 0; i < min; i++) chain(() => this.compile(item));
    if (max === Infinity) {
      // L: split body, out; body; jmp L
      const start = this.prog.length;
      this.patch(holes, start);
      const split: Extract<Inst, { op: "split" }> = { op: "split", a: -1, b: -1 };
      this.emit(split);
      split.a = this.prog.length;
      const body = this.compile(item);
      this.patch(body, start);
      if (body.length === 0) this.emit({ op: "jmp", to: start });
      return [(to) => (split.b = to)];
    }
    const exits: Array<(to: number) => void> = [];
    for (let i = min; i < max; i++) {
      chain(() => {
        const split: Extract<Inst, { op: "split" }> = { op: "split", a: -1, b: -1 };
        this.emit(split);
        split.a = this.prog.length;
        exits.push((to) => (split.b = to));
        return this.compile(item);
      });
    }
    return [...holes, ...exits];
  }
}

export interface CompiledPattern {
  readonly size: number;
  test(subject: string): boolean;
}

function inRanges(ranges: Range[], cp: number): boolean {
  for (const [lo, hi] of ranges) if (cp >= lo && cp <= hi) return true;
  return false;
}

/** Membership; under case folding a character is in the set when any of its case variants is. */
function inSet(set: CharSet, cp: number, variants: number[] | null): boolean {
  const hit = set.fold && variants ? variants.some((v) => inRanges(set.ranges, v)) : inRanges(set.ranges, cp);
  return hit !== set.negated;
}

function foldVariants(cp: number): number[] {
  if (cp < 128) return (cp >= 65 && cp <= 90) || (cp >= 97 && cp <= 122) ? [cp, cp ^ 32] : [cp];
  const s = String.fromCodePoint(cp);
  const out = new Set<number>([cp]);
  for (const v of [s.toLowerCase(), s.toUpperCase()]) if ([...v].length === 1) out.add(v.codePointAt(0)!);
  return [...out];
}

function holds(kind: Assertion, before: number, after: number): boolean {
  switch (kind) {
    case "bot":
      return before === -1;
    case "eot":
      return after === -1;
    case "bol":
      return before === -1 || before === 10;
    case "eol":
      return after === -1 || after === 10;
    default:
      return (isWord(before) !== isWord(after)) === (kind === "word");
  }
}

const isWord = (cp: number) => (cp >= 48 && cp <= 57) || (cp >= 65 && cp <= 90) || cp === 95 || (cp >= 97 && cp <= 122);

/** Compiles a pattern or throws `PatternError` naming what is refused. */
export function compilePattern(pattern: string): CompiledPattern {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new PatternError(`a pattern may be at most ${MAX_PATTERN_LENGTH} characters`);
  const compiler = new Compiler();
  const holes = compiler.compile(new Parser(pattern).parse());
  const matchAt = compiler.prog.length;
  compiler.prog.push({ op: "match" });
  for (const hole of holes) hole(matchAt);
  const prog = compiler.prog;
  const folds = prog.some((inst) => inst.op === "char" && inst.set.fold);
  return {
    size: prog.length,
    test(subject: string): boolean {
      // Unanchored search: a thread starts at every position; each state is live at most once per
      // position (marked with the position's generation), so one step costs O(program size).
      const n = prog.length;
      const mark = new Int32Array(n).fill(-1);
      const stack = new Int32Array(2 * n + 2);
      let current = new Int32Array(n);
      let next = new Int32Array(n);
      let currentCount = 0;
      let nextCount = 0;
      let generation = 0;
      /** Follows the empty transitions from `pc` at a position between `before` and `after`; true on a match. */
      const add = (toNext: boolean, pc: number, before: number, after: number): boolean => {
        let top = 0;
        stack[top++] = pc;
        while (top > 0) {
          const at = stack[--top]!;
          if (mark[at] === generation) continue;
          mark[at] = generation;
          const inst = prog[at]!;
          if (inst.op === "char") {
            if (toNext) next[nextCount++] = at;
            else current[currentCount++] = at;
          } else if (inst.op === "split") {
            stack[top++] = inst.b;
            stack[top++] = inst.a;
          } else if (inst.op === "jmp") stack[top++] = inst.to;
          else if (inst.op === "match") return true;
          else if (holds(inst.kind, before, after)) stack[top++] = inst.next;
        }
        return false;
      };
      let prev = -1;
      let i = 0;
      let cp = subject.length > 0 ? subject.codePointAt(0)! : -1;
      for (;;) {
        generation++;
        // Threads carried over were added under the previous generation; re-mark them for this one.
        for (let k = 0; k < currentCount; k++) mark[current[k]!] = generation;
        if (add(false, 0, prev, cp)) return true;
        if (cp === -1) return false;
        const width = cp > 0xffff ? 2 : 1;
        const after = i + width < subject.length ? subject.codePointAt(i + width)! : -1;
        const variants = folds ? foldVariants(cp) : null;
        generation++;
        nextCount = 0;
        for (let k = 0; k < currentCount; k++) {
          const inst = prog[current[k]!] as Extract<Inst, { op: "char" }>;
          if (inSet(inst.set, cp, variants) && add(true, inst.next, cp, after)) return true;
        }
        [current, next] = [next, current];
        currentCount = nextCount;
        prev = cp;
        cp = after;
        i += width;
      }
    },
  };
}
