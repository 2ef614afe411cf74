// The graphs of examples/ bundled into the Worker, by file name (the Worker has no file system).
// An example added to examples/catalog.json needs its import here too; test/onboarding.test.ts
// fails until every catalog entry has its graph and every example file is in the catalog.
import appealReview from "../../examples/appeal-review.json";
import harassmentReview from "../../examples/harassment-review.json";
import knownMedia from "../../examples/known-media.json";
import spamTriage from "../../examples/spam-triage.json";
import triage from "../../examples/triage.json";

export const TEMPLATE_GRAPHS: Readonly<Record<string, unknown>> = {
  "triage.json": triage,
  "spam-triage.json": spamTriage,
  "harassment-review.json": harassmentReview,
  "known-media.json": knownMedia,
  "appeal-review.json": appealReview,
};
