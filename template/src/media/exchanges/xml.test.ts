// The XML reader the NCMEC client uses: what the hash sharing API sends reads as it should, and
// anything malformed or carrying a DOCTYPE is refused rather than guessed.
import { describe, expect, it } from "vitest";
import { child, parseXml } from "./xml";

describe("parseXml", () => {
  it("reads namespaced elements, attributes, escaped text, CDATA and self-closing elements", () => {
    const root = parseXml(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
      <!-- a comment -->
      <q:queryResult xmlns:q="https://example.test/ns" xmlns="https://example.test/ns">
        <images count="1" maxTimestamp="2026-01-02T03:04:05Z">
          <image><id>e&amp;1</id><note><![CDATA[a <b> & c]]></note><feedback /></image>
        </images>
        <paging><next>/v2/entries?a=1&amp;b=&#50;&#x33;</next></paging>
      </q:queryResult>`);
    expect(root?.name).toBe("queryResult");
    const images = child(root!, "images")!;
    expect(images.attrs).toEqual({ count: "1", maxTimestamp: "2026-01-02T03:04:05Z" });
    const image = images.children[0]!;
    expect(child(image, "id")?.text).toBe("e&1");
    expect(child(image, "note")?.text).toBe("a <b> & c");
    expect(child(image, "feedback")).toEqual({ name: "feedback", attrs: {}, children: [], text: "" });
    expect(child(child(root!, "paging"), "next")?.text).toBe("/v2/entries?a=1&b=23");
  });

  it("refuses a DOCTYPE, unknown entities, bare ampersands, mismatched or unclosed tags and two roots", () => {
    for (const bad of [`<!DOCTYPE r [<!ENTITY x "y">]><r>&x;</r>`, `<r>&nbsp;</r>`, `<r>a & b</r>`, `<r><a></b></r>`, `<r><a></r>`, `<r></r><r></r>`, `text<r></r>`, `<r>&#x110000;</r>`]) {
      expect(parseXml(bad)).toBeNull();
    }
  });
});
