// A linear-time regular expression matcher for CEL's `matches()` (an RE2-like subset).
// Patterns compile to a Thompson NFA that is simulated one code point at a time with a set of
// live states (no backtracking), so a search costs O(subject length × program size) whatever
// the pattern. Constructs that need backtracking (backreferences, lookaround) are refused, as
// RE2 refuses them. No code generation: the program is data.
// This file owns compilation of the parsed pattern (linear-regex-parse.ts) to that program and
// the simulation that runs it.

import { type Assertion, type CharSet, type Node, Parser, PatternError, type Range } from "./linear-regex-parse";

// The engine's one error type (the parser and the compiler throw it): callers import it from here.
export { PatternError };

export const MAX_PATTERN_LENGTH = 1_024;
/** Instructions in one compiled program; counted repetition expands, so this bounds `a{1000}{1000}`. */
export const MAX_PROGRAM_SIZE = 2_000;

type Inst = { op: "char"; set: CharSet; next: number } | { op: "split"; a: number; b: number } | { op: "jmp"; to: number } | { op: "assert"; kind: Assertion; next: number } | { op: "match" };

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
