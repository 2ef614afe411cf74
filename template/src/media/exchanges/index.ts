// Hash exchanges: a bank follows ThreatExchange, NCMEC hash sharing or StopNCII, pulled on the
// schedule behind one interface (types.ts), with contributions back where the exchange takes them.
// Its routes are media/exchange-routes.ts (route files sit at the domain's top).
export { sweepHashExchanges } from "./sync";
export { HASH_EXCHANGE_KINDS, type HashExchange, type HashExchangeKind } from "./types";
