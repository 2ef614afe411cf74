// What the config panel offers to choose from (queues, action types, AI providers, policies,
// components, webhook endpoints), loaded once per editor. A list the person may not read is empty.
import { get, type Page } from "../../api";
import type { Lookups } from "../../graph/config-panel";

export const EMPTY_LOOKUPS: Lookups = { queues: [], actionTypes: [], providers: [], policies: [], components: { builtIns: [], versions: [] }, endpoints: [] };

export async function loadLookups(signal: AbortSignal): Promise<Lookups> {
  const soft = <T>(p: Promise<T>, fallback: T) => p.catch(() => fallback);
  const [queues, actionTypes, providers, policies, components, endpoints] = await Promise.all([
    soft(get<Page<{ id: string; name: string }>>("/queues", signal), { items: [] }),
    soft(get<Page<{ key: string; name: string }>>("/action-types", signal), { items: [] }),
    soft(get<Page<{ id: string; name?: string; model: string }>>("/ai-providers", signal), { items: [] }),
    soft(get<Page<Lookups["policies"][number]>>("/policies", signal), { items: [] }),
    soft(get<{ builtIns: string[]; items: Array<{ id: string; name: string; versions?: Array<{ id: string; version?: number }> }> }>("/components", signal), { builtIns: [], items: [] }),
    soft(get<Page<{ id: string; url: string }>>("/webhook-endpoints", signal), { items: [] }),
  ]);
  return {
    queues: queues.items,
    actionTypes: actionTypes.items,
    providers: providers.items,
    policies: policies.items,
    endpoints: endpoints.items,
    components: {
      builtIns: components.builtIns ?? [],
      versions: (components.items ?? []).flatMap((c) => (c.versions ?? []).map((v) => ({ id: v.id, label: `${c.name} v${v.version ?? "?"}` }))),
    },
  };
}
