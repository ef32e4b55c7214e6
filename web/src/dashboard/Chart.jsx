// A stacked bar chart in plain SVG (tokens in + tokens out per key) with the USD of each bar
// as a dot on its own scale. The numbers are also in the table beside it.
export function BarChart({ rows, label }) {
  const W = 640; const H = 220; const PAD = 36; const n = Math.max(rows.length, 1);
  const maxTokens = Math.max(1, ...rows.map((r) => (r.tokens_in || 0) + (r.tokens_out || 0)));
  const maxUsd = Math.max(1e-9, ...rows.map((r) => r.cost_usd || 0));
  const bw = (W - PAD * 2) / n;
  const y = (v) => H - PAD - (v / maxTokens) * (H - PAD * 2);
  return (
    <svg class="chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label}>
      <title>{label}</title>
      <line x1={PAD} y1={H - PAD} x2={W - PAD} y2={H - PAD} class="axis" />
      <text x={PAD} y={PAD - 12} class="tick">{maxTokens.toLocaleString('en-US')} tokens</text>
      <text x={W - PAD} y={PAD - 12} class="tick usd" text-anchor="end">${maxUsd.toFixed(4)}</text>
      {rows.map((r, i) => {
        const x = PAD + i * bw + bw * 0.15; const w = bw * 0.7;
        const tin = r.tokens_in || 0; const tout = r.tokens_out || 0;
        const cy = H - PAD - ((r.cost_usd || 0) / maxUsd) * (H - PAD * 2);
        return (
          <g key={r.key}>
            <title>{`${r.key}: ${tin} in, ${tout} out, $${(r.cost_usd || 0).toFixed(4)}`}</title>
            <rect x={x} y={y(tin)} width={w} height={H - PAD - y(tin)} class="bar-in" />
            <rect x={x} y={y(tin + tout)} width={w} height={y(tin) - y(tin + tout)} class="bar-out" />
            <circle cx={x + w / 2} cy={cy} r={3} class="dot-usd" />
            {n <= 16 && <text x={x + w / 2} y={H - PAD + 14} class="tick" text-anchor="middle">{String(r.key).slice(0, 12)}</text>}
          </g>
        );
      })}
    </svg>
  );
}
