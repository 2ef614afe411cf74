// The deployments of an installation as the event path last loaded them (deployed-versions.ts),
// kept briefly: a deploy on another isolate shows within DEPLOYED_TTL_MS, one on this isolate at
// once (rule-sets.ts forgets the installation's entry).
import type { LoadedVersion } from "./rule-sets";

/** What intake needs of an installation: its deployed versions and its sample rate. */
export interface Deployed {
  versions: LoadedVersion[];
  sampleRate: number;
}

export const DEPLOYED_TTL_MS = 2_000;
export const deployedCache = new Map<string, { until: number; deployed: Deployed }>();

/** Drops an installation's cached deployments (after a deploy or a settings change on this isolate). */
export function forgetDeployed(installationId: string): void {
  deployedCache.delete(installationId);
}
