// Usage and cost from the ledger: "what did this cost me?" as headline tiles (with the change since
// the period of equal length before), then per day, per model and per component as charts and tables.
import { useState } from 'preact/hooks';
import { get, qs } from '../api.js';
import { change, isoDay, num, usd } from '../format.js';
import { BarChart } from './Chart.jsx';
import { EmptyRow, ErrorLine, useLoad } from './common.jsx';

const GROUPS = [['day', 'Usage by day'], ['model', 'Usage by model'], ['component', 'Usage by component']];

function Tile({ name, label, value, detail, now, before, span }) {
  const moved = change(now, before);
  return (
    <div class="tile" data-tile={name}>
      <span class="tile-label">{label}</span>
      <strong class="tile-value">{value}</strong>
      {detail && <span class="tile-detail muted">{detail}</span>}
      {moved && <span class="tile-change muted" data-change>{moved} vs the {span} before</span>}
    </div>
  );
}

function Tiles({ from, to }) {
  const { data, error } = useLoad(() => get(`/api/jarvis/usage${qs({ from, to, group_by: 'day' })}`), [from, to]);
  if (error) return <ErrorLine error={error} />;
  if (!data || !data.totals) return null;
  const t = data.totals; const p = data.previous;
  const days = Math.round((new Date(data.to) - new Date(data.from)) / 86400e3) + 1;
  const span = `${days} day${days === 1 ? '' : 's'}`;
  const tokens = (x) => x && x.tokens_in + x.tokens_out;
  const perRun = (x) => (x && x.runs ? x.cost_usd / x.runs : null);
  return (
    <section class="tiles" aria-label="Totals for the period">
      <Tile name="usd" label="Total cost" value={usd(t.cost_usd)} now={t.cost_usd} before={p && p.cost_usd} span={span}
        detail={t.cost_known ? null : 'some calls had no known price'} />
      <Tile name="tokens" label="Tokens" value={num(tokens(t))} now={tokens(t)} before={tokens(p)} span={span}
        detail={`${num(t.tokens_in)} in · ${num(t.tokens_out)} out`} />
      <Tile name="runs" label="Runs" value={num(t.runs)} now={t.runs} before={p && p.runs} span={span}
        detail={`${num(t.calls)} model call${t.calls === 1 ? '' : 's'}`} />
      <Tile name="per-run" label="Cost per run" value={t.runs ? usd(perRun(t)) : '—'} span={span}
        now={perRun(t)} before={perRun(t) === null || !p ? null : perRun(p) ?? 0} />
    </section>
  );
}

/** The day rows with the days of no calls as zeros, so the day chart is a time line (at most 366). */
function everyDay(rows, from, to) {
  const byDay = new Map(rows.map((r) => [r.key, r]));
  const out = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86400e3) {
    const key = isoDay(new Date(t));
    out.push(byDay.get(key) || { key, calls: 0, tokens_in: 0, tokens_out: 0, cost_usd: 0, cost_known: true });
  }
  return out;
}

function Grouping({ group, label, from, to }) {
  const { data, error } = useLoad(() => get(`/api/jarvis/usage${qs({ from, to, group_by: group })}`), [group, from, to]);
  const rows = data ? data.rows : [];
  const total = rows.reduce((a, r) => ({ calls: a.calls + r.calls, tin: a.tin + r.tokens_in, tout: a.tout + r.tokens_out, usd: a.usd + (r.cost_usd || 0) }), { calls: 0, tin: 0, tout: 0, usd: 0 });
  return (
    <section class="usage">
      <h3>{label}</h3>
      <ErrorLine error={error} />
      {data && (
        <>
          {rows.length > 0 && <BarChart rows={group === 'day' ? everyDay(rows, data.from, data.to) : rows} label={label} />}
          <table class="grid" aria-label={label}>
            <thead><tr><th scope="col">{group === 'day' ? 'Day' : group === 'model' ? 'Model' : 'Component'}</th><th scope="col">Calls</th><th scope="col">Tokens in</th><th scope="col">Tokens out</th><th scope="col">USD</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.key} data-key={r.key}><th scope="row">{r.key}</th><td>{num(r.calls)}</td><td>{num(r.tokens_in)}</td><td>{num(r.tokens_out)}</td><td>{usd(r.cost_usd)}</td></tr>
              ))}
              {rows.length === 0 && <EmptyRow cols={5}>No model calls in this period.</EmptyRow>}
            </tbody>
            {rows.length > 0 && <tfoot><tr><th scope="row">Total</th><td>{num(total.calls)}</td><td>{num(total.tin)}</td><td>{num(total.tout)}</td><td>{usd(total.usd)}</td></tr></tfoot>}
          </table>
        </>
      )}
    </section>
  );
}

export function Usage() {
  const today = new Date();
  const [from, setFrom] = useState(isoDay(new Date(today.getTime() - 29 * 86400e3)));
  const [to, setTo] = useState(isoDay(today));
  return (
    <>
      <h2>Usage</h2>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Usage period">
        <label>From <input type="date" value={from} onChange={(e) => setFrom(e.currentTarget.value)} /></label>
        <label>To <input type="date" value={to} onChange={(e) => setTo(e.currentTarget.value)} /></label>
        <span class="muted">UTC days, inclusive</span>
      </form>
      <Tiles from={from} to={to} />
      {GROUPS.map(([group, label]) => <Grouping key={group} group={group} label={label} from={from} to={to} />)}
    </>
  );
}
