// Detection: rule sets over the product's event stream, event intake, sliding-window counters on
// Durable Objects (EntityCounters) and entity labels. Routes are in routes.ts.
export { EntityCounters } from "./counters";
export { sweepExpiredLabels, sweepOldSamples } from "./labels";
export { labelQuerySql } from "./atproto";
