// Data loading and keyboard helpers shared by the pages.
import { useCallback, useEffect, useRef, useState } from "react";
import { get, type Page } from "./api";

export interface Resource<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
  setData: (value: T) => void;
}

/** Loads `load()` when `key` changes (aborting the previous load); `reload()` loads again. */
export function useResource<T>(load: ((signal: AbortSignal) => Promise<T>) | null, key: unknown[]): Resource<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: load !== null });
  const [tick, setTick] = useState(0);
  const loader = useRef(load);
  loader.current = load;
  // biome-ignore lint/correctness/useExhaustiveDependencies: `load` is a new closure on every render (read through the ref); the caller's `key` says when to load again, and `tick` is reload()
  useEffect(() => {
    const fn = loader.current;
    if (!fn) {
      setState({ data: undefined, error: undefined, loading: false });
      return;
    }
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true }));
    fn(controller.signal).then(
      (data) => {
        if (!controller.signal.aborted) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState((previous) => ({ data: previous.data, error, loading: false }));
      },
    );
    return () => controller.abort();
  }, [...key, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const setData = useCallback((data: T) => setState({ data, error: undefined, loading: false }), []);
  return { ...state, reload, setData };
}

export interface PagedList<T> {
  items: T[];
  first: Resource<Page<T>>;
  hasMore: boolean;
  loadingMore: boolean;
  moreError: unknown;
  loadMore: () => Promise<void>;
}

/**
 * A cursor-paged list: `url(cursor)` gives the API path of a page. The first page loads when `key`
 * changes; `loadMore()` appends the next one (its failure shows in `moreError`).
 */
export function usePagedList<T>(url: (cursor?: string) => string, key: unknown[]): PagedList<T> {
  const [pages, setPages] = useState<T[][]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [moreError, setMoreError] = useState<unknown>(null);
  const first = useResource(async (signal) => {
    const page = await get<Page<T>>(url(), signal);
    setPages([page.items]);
    setCursor(page.nextCursor ?? null);
    setMoreError(null);
    return page;
  }, key);
  const loadMore = async () => {
    if (!cursor) return;
    setLoadingMore(true);
    setMoreError(null);
    try {
      const page = await get<Page<T>>(url(cursor));
      setPages((list) => [...list, page.items]);
      setCursor(page.nextCursor ?? null);
    } catch (error) {
      setMoreError(error);
    } finally {
      setLoadingMore(false);
    }
  };
  return { items: pages.flat(), first, hasMore: cursor !== null, loadingMore, moreError, loadMore };
}

/** Re-runs `callback` every `ms` while `active`. */
export function useInterval(callback: () => void, ms: number, active = true): void {
  const saved = useRef(callback);
  saved.current = callback;
  useEffect(() => {
    if (!active) return;
    const id = window.setInterval(() => saved.current(), ms);
    return () => window.clearInterval(id);
  }, [ms, active]);
}

/** True when a key press belongs to a text field (shortcuts must not steal typing). */
export function isTyping(event: KeyboardEvent): boolean {
  const target = event.target as HTMLElement | null;
  if (!target) return false;
  if (target.isContentEditable) return true;
  const tag = target.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (target as HTMLInputElement).type;
    return !["checkbox", "radio", "button", "submit", "reset"].includes(type);
  }
  return false;
}

/** Page-level keyboard shortcuts; the handler decides (and returns true when it handled the key). */
export function useShortcuts(handler: (event: KeyboardEvent) => boolean | undefined, active = true): void {
  const saved = useRef(handler);
  saved.current = handler;
  useEffect(() => {
    if (!active) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.defaultPrevented) return;
      if (saved.current(event) === true) event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [active]);
}

/** Debounces a value. */
export function useDebounced<T>(value: T, ms: number): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const id = window.setTimeout(() => setDebounced(value), ms);
    return () => window.clearTimeout(id);
  }, [value, ms]);
  return debounced;
}
