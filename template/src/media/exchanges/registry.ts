// The exchanges by kind: one table of implementations, so the sync, the follow and the
// contribution never branch on a kind.
import { ncmecHashSharing } from "./ncmec";
import { stopNcii } from "./stopncii";
import { threatExchange } from "./threatexchange";
import type { HashExchange, HashExchangeKind } from "./types";

export const EXCHANGES: Readonly<Record<HashExchangeKind, HashExchange>> = {
  threatexchange: threatExchange,
  ncmec: ncmecHashSharing,
  stopncii: stopNcii,
};
