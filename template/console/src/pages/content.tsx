// The reported content, shown with care for the person reviewing it: images and video start
// blurred and in greyscale until revealed (per-user default), links never send a referrer, and
// only http(s) and inline image data are ever loaded.
import { useEffect, useState } from "react";

export interface MediaItem {
  url: string;
  kind: "image" | "video";
  alt: string;
  from: string;
}

const IMAGE_EXT = /\.(png|jpe?g|gif|webp|avif|bmp|svg)(\?|#|$)/iu;
const VIDEO_EXT = /\.(mp4|webm|mov|m4v|ogv)(\?|#|$)/iu;
const TEXT_KEYS = ["text", "body", "content", "caption", "title", "message", "bio", "description", "name"];

export function safeUrl(value: unknown): string | null {
  if (typeof value !== "string") return null;
  if (/^data:image\/(png|jpe?g|gif|webp|avif);base64,/iu.test(value)) return value;
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  } catch {
    return null;
  }
}

function mediaKind(url: string, hint: unknown): "image" | "video" | null {
  const h = typeof hint === "string" ? hint.toLowerCase() : "";
  if (h.startsWith("video") || h === "gif_video") return "video";
  if (h.startsWith("image") || h === "photo" || h === "screenshot" || h === "picture") return "image";
  if (url.startsWith("data:image/")) return "image";
  if (IMAGE_EXT.test(url)) return "image";
  if (VIDEO_EXT.test(url)) return "video";
  return null;
}

/** Finds media in a snapshot (any depth up to 5) and in evidence items. */
export function collectMedia(snapshot: unknown, evidence: Array<{ kind: string; url?: string; text?: string }> = []): MediaItem[] {
  const found: MediaItem[] = [];
  const seen = new Set<string>();
  const add = (url: string, kind: "image" | "video", alt: string, from: string) => {
    if (seen.has(url)) return;
    seen.add(url);
    found.push({ url, kind, alt, from });
  };
  const walk = (value: unknown, path: string, depth: number) => {
    if (depth > 5 || found.length >= 50) return;
    if (typeof value === "string") {
      const url = safeUrl(value);
      const kind = url ? mediaKind(url, null) : null;
      if (url && kind) add(url, kind, "", path);
      return;
    }
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) walk(item, `${path}[${i}]`, depth + 1);
      return;
    }
    if (value && typeof value === "object") {
      const record = value as Record<string, unknown>;
      const url = safeUrl(record.url ?? record.src ?? record.href);
      const kind = url ? mediaKind(url, record.type ?? record.kind ?? record.mimeType ?? record.mime_type) : null;
      if (url && kind) {
        add(url, kind, typeof record.alt === "string" ? record.alt : typeof record.description === "string" ? record.description : "", path);
        return;
      }
      for (const [key, child] of Object.entries(record)) walk(child, path ? `${path}.${key}` : key, depth + 1);
    }
  };
  walk(snapshot, "", 0);
  evidence.forEach((item, i) => {
    const url = safeUrl(item.url);
    const kind = url ? mediaKind(url, item.kind) : null;
    if (url && kind) add(url, kind, item.text ?? "", `evidence[${i}]`);
  });
  return found;
}

/** The readable text of a snapshot: a plain string, or its text-like fields. */
export function snapshotText(snapshot: unknown): Array<[string, string]> {
  if (typeof snapshot === "string") return [["text", snapshot]];
  if (!snapshot || typeof snapshot !== "object" || Array.isArray(snapshot)) return [];
  const record = snapshot as Record<string, unknown>;
  return TEXT_KEYS.filter((key) => typeof record[key] === "string" && !safeUrl(record[key])).map((key) => [key, record[key] as string]);
}

/** One media item: blurred and greyscale until revealed; the reveal is per item and undoable. */
export function Media({ item, revealed, onToggle, index }: { item: MediaItem; revealed: boolean; onToggle: () => void; index: number }) {
  const label = item.alt ? `${item.kind} ${index + 1}: ${item.alt}` : `${item.kind} ${index + 1}`;
  return (
    <figure className={`media ${revealed ? "media-revealed" : "media-hidden"}`}>
      <div className="media-frame">
        {item.kind === "image" ? (
          <img
            src={item.url}
            alt={revealed ? item.alt || `Reported ${label}` : `Reported ${label}, hidden until revealed`}
            referrerPolicy="no-referrer"
            loading="lazy"
            data-testid="media"
            data-revealed={revealed ? "true" : "false"}
            draggable={false}
          />
        ) : (
          <video src={item.url} controls={revealed} preload="metadata" muted data-testid="media" data-revealed={revealed ? "true" : "false"} aria-label={`Reported ${label}`} />
        )}
        {!revealed ? (
          <span className="media-veil" aria-hidden="true">
            Hidden
          </span>
        ) : null}
      </div>
      <figcaption>
        <button type="button" className="btn btn-small" aria-pressed={revealed} onClick={onToggle} data-testid="reveal-media">
          {revealed ? `Hide ${item.kind}` : `Reveal ${item.kind}`}
        </button>
        <span className="muted small">{item.from || "snapshot"}</span>
      </figcaption>
    </figure>
  );
}

/** The media of a report, with a shared "reveal all" toggle (shortcut v on the task page). */
export function MediaGallery({ items, blurByDefault, greyscaleLocked = false, revealAllSignal }: { items: MediaItem[]; blurByDefault: boolean; greyscaleLocked?: boolean; revealAllSignal: number }) {
  const [revealed, setRevealed] = useState<Set<number>>(() => (blurByDefault ? new Set() : new Set(items.map((_, i) => i))));
  useEffect(() => {
    if (revealAllSignal === 0) return;
    setRevealed((current) => (current.size === items.length ? new Set() : new Set(items.map((_, i) => i))));
  }, [revealAllSignal, items]);
  if (items.length === 0) return null;
  return (
    // biome-ignore lint/a11y/useSemanticElements: a group of images, not of form fields, so not a <fieldset>
    <div className={greyscaleLocked ? "gallery gallery-greyscale" : "gallery"} role="group" aria-label="Reported media">
      {items.map((item, i) => (
        <Media
          key={item.url}
          item={item}
          index={i}
          revealed={revealed.has(i)}
          onToggle={() =>
            setRevealed((current) => {
              const next = new Set(current);
              if (next.has(i)) next.delete(i);
              else next.add(i);
              return next;
            })
          }
        />
      ))}
    </div>
  );
}

export function ExternalLink({ href, children }: { href: string; children: React.ReactNode }) {
  const url = safeUrl(href);
  if (!url || url.startsWith("data:")) return <span>{children}</span>;
  return (
    <a href={url} target="_blank" rel="noopener noreferrer">
      {children}
      <span className="sr-only"> (opens in a new tab)</span>
    </a>
  );
}
