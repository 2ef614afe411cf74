// A small, strict XML reader for the exchanges' XML answers (NCMEC's hash sharing API): elements,
// attributes, text, CDATA and the five predefined and numeric character references. Namespaces are
// dropped to local names (NCMEC's default namespace adds nothing). A DOCTYPE is refused, so no
// entity is ever defined or expanded. workerd has no DOMParser; this reads what the API sends and
// answers null for anything malformed.

export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function decode(text: string): string | null {
  // A bare "&" (not starting a reference) is not well-formed.
  if (/&(?!(?:#x[0-9a-fA-F]+|#\d+|[a-zA-Z]+);)/u.test(text)) return null;
  let bad = false;
  const out = text.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-zA-Z]+);/gu, (_, ref: string) => {
    const code = ref.startsWith("#x") ? Number.parseInt(ref.slice(2), 16) : ref.startsWith("#") ? Number(ref.slice(1)) : null;
    if (code === null) {
      const known = ENTITIES[ref];
      if (known === undefined) bad = true;
      return known ?? "";
    }
    if (code > 0x10ffff) {
      bad = true;
      return "";
    }
    return String.fromCodePoint(code);
  });
  return bad ? null : out;
}

const localName = (name: string) => name.slice(name.indexOf(":") + 1);
const TOKEN = /<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!\[CDATA\[([\s\S]*?)\]\]>|<!([^>]*)>|<\/([^\s>]+)\s*>|<([^\s/>]+)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)|(<)/gu;
const ATTR = /([^\s=/>]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/gu;

/** The document's root element, or null when the text is not well-formed XML of this subset. */
export function parseXml(text: string): XmlElement | null {
  const stack: XmlElement[] = [];
  let root: XmlElement | null = null;
  for (const m of text.matchAll(TOKEN)) {
    const [, cdata, declaration, close, open, attrs, selfClose, chars, stray] = m;
    if (stray !== undefined || declaration !== undefined) return null;
    const top = stack[stack.length - 1];
    if (cdata !== undefined) {
      if (!top) return null;
      top.text += cdata;
    } else if (chars !== undefined) {
      if (!top) {
        if (chars.trim()) return null;
        continue;
      }
      const decoded = decode(chars);
      if (decoded === null) return null;
      top.text += decoded;
    } else if (close !== undefined) {
      if (!top || top.name !== localName(close)) return null;
      stack.pop();
    } else if (open !== undefined) {
      const element: XmlElement = { name: localName(open), attrs: {}, children: [], text: "" };
      for (const a of (attrs ?? "").matchAll(ATTR)) {
        const value = decode(a[2] ?? a[3] ?? "");
        if (value === null) return null;
        element.attrs[localName(a[1]!)] = value;
      }
      if (top) top.children.push(element);
      else if (root) return null;
      else root = element;
      if (!selfClose) stack.push(element);
    }
  }
  return stack.length === 0 ? root : null;
}

/** The first child named `name`, or undefined. */
export const child = (element: XmlElement | undefined, name: string): XmlElement | undefined => element?.children.find((c) => c.name === name);
