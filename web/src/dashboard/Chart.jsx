// A bar chart in plain SVG: one bar per key, what it cost (tokens when no call had a price), its
// value written above it, bars never wider than MAX_BAR so one category is one ordinary bar. Each
// bar takes the keyboard focus and shows a tooltip (an HTML element, role="tooltip", also on hover)
// with its calls, tokens and cost. The numbers are also in the table beside it.
import { useState } from 'preact/hooks';
import { compact, num, usd } from '../format.js';

const W = 640; const H = 220; const PAD = 36; const MAX_BAR = 48;
let charts = 0;

export function BarChart({ rows, label }) {
  const [active, setActive] = useState(null);
  const [id] = useState(() => `chart-${++charts}`);
  const byUsd = rows.some((r) => (r.cost_usd || 0) > 0);
  const value = (r) => (byUsd ? r.cost_usd || 0 : (r.tokens_in || 0) + (r.tokens_out || 0));
  const text = (v) => (byUsd ? usd(v, { coarse: true }) : compact(v));
  const max = Math.max(byUsd ? 1e-9 : 1, ...rows.map(value));
  const n = Math.max(rows.length, 1);
  const slot = (W - PAD * 2) / n;
  const bw = Math.min(slot * 0.7, MAX_BAR);
  const every = Math.ceil(n / 12); // key labels: at most 12 under the axis
  const labels = slot >= 34; // value labels above the bars when they fit
  const y = (v) => H - PAD - (v / max) * (H - PAD * 2);
  const shown = active === null ? null : rows[active];
  // One tab stop for the chart; the arrow keys move between bars, Escape hides the tooltip.
  const step = (e, i) => {
    if (e.key === 'Escape') { setActive(null); return; }
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: rows.length - 1 }[e.key];
    if (to === undefined || to < 0 || to >= rows.length) return;
    e.preventDefault();
    const bar = e.currentTarget.parentNode.querySelector(`g.bar:nth-of-type(${to + 1})`);
    if (bar) bar.focus();
  };
  const tip = shown && {
    left: `${((PAD + active * slot + slot / 2) / W) * 100}%`, top: `${(y(value(shown)) / H) * 100}%`,
  };
  return (
    <div class="chart-box" onMouseLeave={() => setActive(null)}>
      <svg class="chart" viewBox={`0 0 ${W} ${H}`} role="group" aria-label={`${label}: ${byUsd ? 'USD' : 'tokens'} per key`}>
        <line x1={PAD} y1={H - PAD} x2={W - PAD} y2={H - PAD} class="axis" />
        <text x={PAD} y={PAD - 14} class="tick" aria-hidden="true">{byUsd ? `max ${usd(max)}` : `max ${num(max)} tokens`}</text>
        {rows.map((r, i) => {
          const v = value(r);
          const x = PAD + i * slot + (slot - bw) / 2;
          const top = y(v);
          return (
            <g key={r.key} class={`bar${active === i ? ' active' : ''}`} tabindex={i === (active ?? 0) ? 0 : -1} role="img" data-key={r.key}
              aria-label={`${r.key}: ${usd(r.cost_usd)}, ${num((r.tokens_in || 0) + (r.tokens_out || 0))} tokens, ${num(r.calls)} calls`}
              aria-describedby={active === i ? `${id}-tip` : undefined}
              onMouseEnter={() => setActive(i)} onFocus={() => setActive(i)} onBlur={() => setActive(null)}
              onKeyDown={(e) => step(e, i)}>
              <rect x={x - 2} y={PAD - 4} width={bw + 4} height={H - PAD * 2 + 4} class="hit" />
              <rect x={x} y={top} width={bw} height={Math.max(H - PAD - top, v > 0 ? 1 : 0)} class="bar-value" />
              {labels && <text x={x + bw / 2} y={top - 4} class="value" text-anchor="middle" aria-hidden="true">{text(v)}</text>}
              {i % every === 0 && <text x={x + bw / 2} y={H - PAD + 14} class="tick" text-anchor="middle" aria-hidden="true">{String(r.key).replace(/^\d{4}-(\d\d-\d\d)$/, '$1').slice(0, 12)}</text>}
            </g>
          );
        })}
      </svg>
      {shown && (
        <div id={`${id}-tip`} role="tooltip" class="chart-tip" style={tip}>
          <strong>{shown.key}</strong>
          <span>{usd(shown.cost_usd)}{shown.cost_known === false ? ' (some prices unknown)' : ''}</span>
          <span>{num(shown.tokens_in)} in · {num(shown.tokens_out)} out</span>
          <span>{num(shown.calls)} call{shown.calls === 1 ? '' : 's'}</span>
        </div>
      )}
    </div>
  );
}
