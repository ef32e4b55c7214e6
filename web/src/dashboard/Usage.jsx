// Usage and cost from the ledger: per day, per model, per component, as charts and tables.
import { useState } from 'preact/hooks';
import { get, qs } from '../api.js';
import { isoDay, num, usd } from '../format.js';
import { BarChart } from './Chart.jsx';
import { ErrorLine, useLoad } from './common.jsx';

const GROUPS = [['day', 'Usage by day'], ['model', 'Usage by model'], ['component', 'Usage by component']];

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
          {rows.length > 0 ? <><BarChart rows={rows} label={`Tokens and USD ${label.replace('Usage ', '')}`} />
            <p class="muted small legend"><span class="key-in">■</span> tokens in · <span class="key-out">■</span> tokens out · <span class="key-usd">●</span> USD (right scale)</p></>
            : <p>No model calls in this period.</p>}
          <table class="grid" aria-label={label}>
            <thead><tr><th scope="col">{group === 'day' ? 'Day' : group === 'model' ? 'Model' : 'Component'}</th><th scope="col">Calls</th><th scope="col">Tokens in</th><th scope="col">Tokens out</th><th scope="col">USD</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.key} data-key={r.key}><th scope="row">{r.key}</th><td>{num(r.calls)}</td><td>{num(r.tokens_in)}</td><td>{num(r.tokens_out)}</td><td>{usd(r.cost_usd)}</td></tr>
              ))}
            </tbody>
            <tfoot><tr><th scope="row">Total</th><td>{num(total.calls)}</td><td>{num(total.tin)}</td><td>{num(total.tout)}</td><td>{usd(total.usd)}</td></tr></tfoot>
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
      {GROUPS.map(([group, label]) => <Grouping key={group} group={group} label={label} from={from} to={to} />)}
    </>
  );
}
