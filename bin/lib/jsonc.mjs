// A value-level three-way merge of JSON / JSONC files (wrangler.jsonc, example graphs), for when
// a line merge conflicts or git is absent: the team's changes (base → yours, value by value) are
// applied as text edits to the release's file, so its layout and comments stay. Refuses (null)
// when both sides changed the same value or the release removed what the team changed.
import { parseJsonc } from "./render.mjs";

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
/** JSON with object keys sorted: equal for equal values, whatever the keys' order. */
const canonical = (value) => JSON.stringify(value, (_key, v) => (isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));

/** A JSONC syntax tree with offsets: { kind, start, end, members?: [{ key, start, value }], items? }. */
function parseTree(text) {
  let i = 0;
  const skip = () => {
    for (;;) {
      while (i < text.length && /\s/u.test(text[i])) i += 1;
      if (text.startsWith("//", i)) while (i < text.length && text[i] !== "\n") i += 1;
      else if (text.startsWith("/*", i)) i = text.indexOf("*/", i + 2) === -1 ? text.length : text.indexOf("*/", i + 2) + 2;
      else return;
    }
  };
  const string = () => {
    const start = i;
    i += 1;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i += 1;
    return JSON.parse(text.slice(start, i));
  };
  const value = () => {
    skip();
    const start = i;
    const char = text[i];
    if (char === "{" || char === "[") {
      const object = char === "{";
      const node = object ? { kind: "object", start, members: [] } : { kind: "array", start, items: [] };
      i += 1;
      for (;;) {
        skip();
        if (text[i] === (object ? "}" : "]")) break;
        if (object) {
          const memberStart = i;
          const key = string();
          skip();
          if (text[i] !== ":") throw new Error(`expected : at ${i}`);
          i += 1;
          node.members.push({ key, start: memberStart, value: value() });
        } else node.items.push(value());
        skip();
        if (text[i] === ",") i += 1;
        else if (text[i] !== (object ? "}" : "]")) throw new Error(`expected , at ${i}`);
      }
      i += 1;
      node.end = i;
      return node;
    }
    if (char === '"') string();
    else {
      const match = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/u.exec(text.slice(i));
      if (!match) throw new Error(`unexpected ${char} at ${i}`);
      i += match[0].length;
    }
    return { kind: "leaf", start, end: i };
  };
  return value();
}

/** The changes from `before` to `after`: [{ path, op: "set" | "add" | "delete", value }]. Arrays of equal length are compared item by item. */
function changes(before, after, path = []) {
  if (same(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const found = [];
    for (const key of Object.keys(after)) {
      if (!Object.hasOwn(before, key)) found.push({ path: [...path, key], op: "add", value: after[key] });
      else found.push(...changes(before[key], after[key], [...path, key]));
    }
    for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) found.push({ path: [...path, key], op: "delete" });
    return found;
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) return before.flatMap((item, index) => changes(item, after[index], [...path, index]));
  return [{ path, op: "set", value: after }];
}

const within = (a, b) => a.length <= b.length && a.every((part, index) => part === b[index]);

/** Applies a change to a plain value (the expected result, to check the text edits against). */
function applyValue(root, change) {
  if (change.path.length === 0) return change.value;
  const parent = change.path.slice(0, -1).reduce((node, key) => node[key], root);
  const key = change.path.at(-1);
  if (change.op === "delete") delete parent[key];
  else parent[key] = change.value;
  return root;
}

function find(node, path) {
  let current = node;
  for (const key of path) {
    if (current?.kind === "object") current = current.members.find((m) => m.key === key)?.value;
    else if (current?.kind === "array" && typeof key === "number") current = current.items[key];
    else return undefined;
  }
  return current;
}

/** The text edit for a change on the release's tree: { at, end, text }, or null when it cannot be placed. */
function textEdit(tree, text, change) {
  const serialized = change.op === "delete" ? "" : JSON.stringify(change.value);
  if (change.op === "set") {
    const node = find(tree, change.path);
    return node ? { at: node.start, end: node.end, text: serialized } : null;
  }
  const parent = find(tree, change.path.slice(0, -1));
  if (parent?.kind !== "object") return null;
  const key = change.path.at(-1);
  if (change.op === "add") {
    const last = parent.members.at(-1);
    if (!last) return { at: parent.start + 1, end: parent.start + 1, text: ` ${JSON.stringify(key)}: ${serialized} ` };
    // After the last member (and its trailing comma, which JSONC allows).
    const rest = text.slice(last.value.end, parent.end - 1);
    const comma = /^\s*,/u.exec(rest);
    const at = comma ? last.value.end + comma[0].length : last.value.end;
    return { at, end: at, text: `${comma ? " " : ", "}${JSON.stringify(key)}: ${serialized}` };
  }
  const index = parent.members.findIndex((m) => m.key === key);
  if (index === -1) return null;
  const member = parent.members[index];
  const next = parent.members[index + 1];
  if (next) return { at: member.start, end: next.start, text: "" };
  const previous = parent.members[index - 1];
  return { at: previous ? previous.value.end : member.start, end: member.value.end, text: "" };
}

/** The merged text, or null when the two sides' changes touch the same values or cannot be placed. */
export function mergeJsonc(baseText, oursText, theirsText) {
  let base;
  let ours;
  let theirs;
  let tree;
  try {
    [base, ours, theirs] = [baseText, oursText, theirsText].map(parseJsonc);
    tree = parseTree(theirsText);
  } catch {
    return null;
  }
  const team = changes(base, ours);
  const release = changes(base, theirs);
  for (const mine of team) {
    for (const theirsChange of release) {
      if ((within(mine.path, theirsChange.path) || within(theirsChange.path, mine.path)) && !same(mine, theirsChange)) return null;
    }
  }
  let expected = structuredClone(theirs);
  const edits = [];
  for (const change of team) {
    if (release.some((r) => same(r, change))) continue;
    const edit = textEdit(tree, theirsText, change);
    if (edit === null) return null;
    edits.push(edit);
    try {
      expected = applyValue(expected, change);
    } catch {
      return null;
    }
  }
  edits.sort((a, b) => b.at - a.at);
  for (let k = 1; k < edits.length; k += 1) if (edits[k].end > edits[k - 1].at) return null;
  let merged = theirsText;
  for (const edit of edits) merged = merged.slice(0, edit.at) + edit.text + merged.slice(edit.end);
  try {
    return canonical(parseJsonc(merged)) === canonical(expected) ? merged : null;
  } catch {
    return null;
  }
}
