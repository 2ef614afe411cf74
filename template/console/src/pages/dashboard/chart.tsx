// The dashboard's drawing: number formats, the line and bar chart (an inline SVG with a text
// summary and its numbers in a table), and the headline figure.
import type { ApiResponse } from "../../api";

type Series = ApiResponse<"get", "/metrics">["series"][number];

// Distinguishable in both colour schemes, and each series is also named in the legend and table.
const COLOURS = ["#2f7bbf", "#d9822b", "#3a9a5b", "#c2414b", "#8a63c9", "#6b7785"];

export const pct = (value: number | null) => (value === null ? "—" : `${Math.round(value * 100)}%`);
export const num = (value: number | null | undefined) => (value === null || value === undefined ? "—" : Math.round(value).toLocaleString());

export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${(seconds / 3600).toFixed(seconds < 36_000 ? 1 : 0)} h`;
  return `${Math.round(seconds / 86_400)} d`;
}

export function stepLabel(at: string, step: string): string {
  const d = new Date(at);
  return step === "hour" ? d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit" }) : d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

/** Adds the points of several series (e.g. every category of reports) into one line. */
export function sum(series: Series[], steps: number): number[] {
  const out = Array.from({ length: steps }, () => 0);
  for (const s of series) for (const [i, p] of s.points.entries()) out[i] = out[i]! + (p ?? 0);
  return out;
}

interface Line {
  label: string;
  points: number[];
}

/** A line chart over the range's steps; `bars` draws the first line as bars instead. */
export function Chart({ title, lines, steps, step, bars = false }: { title: string; lines: Line[]; steps: string[]; step: string; bars?: boolean }) {
  const w = 640;
  const h = 160;
  const pad = { l: 36, r: 8, t: 8, b: 22 };
  const max = Math.max(1, ...lines.flatMap((l) => l.points));
  const x = (i: number) => pad.l + (steps.length <= 1 ? 0 : (i * (w - pad.l - pad.r)) / (steps.length - 1));
  const y = (v: number) => pad.t + (h - pad.t - pad.b) * (1 - v / max);
  const barW = Math.max(1, (w - pad.l - pad.r) / Math.max(1, steps.length) - 2);
  const summary = lines.map((l) => `${l.label}: ${num(l.points.reduce((a, b) => a + b, 0))} in total, at most ${num(Math.max(0, ...l.points))} per ${step}`).join("; ");
  const ticks = steps.length > 1 ? [0, Math.floor((steps.length - 1) / 2), steps.length - 1] : [0];
  return (
    <figure className="chart">
      <figcaption className="h3">{title}</figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={`${title}. ${summary || "No data"}.`} preserveAspectRatio="none">
        <line x1={pad.l} x2={w - pad.r} y1={y(0)} y2={y(0)} className="chart-axis" />
        <line x1={pad.l} x2={w - pad.r} y1={y(max)} y2={y(max)} className="chart-grid" />
        <text x={pad.l - 4} y={y(max) + 4} textAnchor="end" className="chart-label">
          {num(max)}
        </text>
        <text x={pad.l - 4} y={y(0)} textAnchor="end" className="chart-label">
          0
        </text>
        {ticks.map((i) => (
          <text key={i} x={x(i)} y={h - 6} textAnchor={i === 0 ? "start" : i === steps.length - 1 ? "end" : "middle"} className="chart-label">
            {stepLabel(steps[i]!, step)}
          </text>
        ))}
        {lines.map((line, n) =>
          bars && n === 0 ? (
            <g key={line.label} fill={COLOURS[n % COLOURS.length]}>
              {/* biome-ignore lint/suspicious/noArrayIndexKey: the index is the bar's step on the time axis, which is what identifies it */}
              {line.points.map((v, i) => (v > 0 ? <rect key={i} x={x(i) - barW / 2} y={y(v)} width={barW} height={y(0) - y(v)} /> : null))}
            </g>
          ) : (
            <polyline key={line.label} fill="none" stroke={COLOURS[n % COLOURS.length]} strokeWidth={2} vectorEffect="non-scaling-stroke" points={line.points.map((v, i) => `${x(i)},${y(v)}`).join(" ")} />
          ),
        )}
      </svg>
      {lines.length > 1 ? (
        <ul className="chart-legend">
          {lines.map((line, n) => (
            <li key={line.label}>
              <span className="chart-swatch" style={{ background: COLOURS[n % COLOURS.length] }} aria-hidden="true" />
              {line.label}
            </li>
          ))}
        </ul>
      ) : null}
    </figure>
  );
}

export function Stat({ label, value, tone, testId }: { label: string; value: string; tone?: "bad" | "warn" | undefined; testId?: string }) {
  return (
    <div className="stat" data-testid={testId}>
      <span className="muted small">{label}</span>
      <strong className={tone === "bad" ? "text-bad" : undefined}>{value}</strong>
    </div>
  );
}
