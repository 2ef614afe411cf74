// Connectors: community products plugged in without an integration of their own (Mastodon).
// Only what does not reach back into enforcement is exported here: enforcement's delivery code
// imports this index for the transport (the service and intake are imported by routes.ts).
export { isConnectorEndpoint, RATE_LIMITED, sendThroughConnector, type TransportResult } from "./mastodon-transport";
export { CONNECTOR_KINDS, MASTODON_ACTIONS, MASTODON_CATEGORIES } from "./mastodon-mapping";
