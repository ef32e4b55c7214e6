// Runs: the list (filters, paging); one run's detail is RunDetail.jsx.
import { useState } from 'preact/hooks';
import { get, qs } from '../api.js';
import { duration, num, usd } from '../format.js';
import { EmptyRow, ErrorLine, Time, useLoad, ValueBar } from './common.jsx';
import { RunDetail } from './RunDetail.jsx';

const STATUSES = ['', 'queued', 'running', 'awaiting_approval', 'success', 'failed', 'timeout', 'cancelled'];
const TRIGGERS = ['', 'api', 'schedule', 'reply', 'cli', 'retry'];

const sum = (runs, field) => runs.reduce((a, r) => a + (r[field] || 0), 0);
const maxCost = (runs) => Math.max(0, ...runs.map((r) => r.cost_usd || 0));

function RunList() {
  const [status, setStatus] = useState('');
  const [trigger, setTrigger] = useState('');
  const [cursor, setCursor] = useState([]);
  const before = cursor.length ? cursor[cursor.length - 1] : undefined;
  const { data, error } = useLoad(() => get(`/api/jarvis/runs${qs({ status, trigger, limit: 50, before_id: before })}`), [status, trigger, before]);
  return (
    <>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Run filters">
        <label>Status <select value={status} onChange={(e) => { setStatus(e.currentTarget.value); setCursor([]); }}>
          {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}</select></label>
        <label>Trigger <select value={trigger} onChange={(e) => { setTrigger(e.currentTarget.value); setCursor([]); }}>
          {TRIGGERS.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}</select></label>
      </form>
      <ErrorLine error={error} />
      {data && (
        <>
          <table class="grid runs-list">
            <caption class="sr-only">Runs, newest first</caption>
            <thead><tr><th>Run</th><th>Status</th><th>Trigger</th><th>Task</th><th>Created</th><th>Duration</th><th>Tokens in</th><th>Tokens out</th><th>USD</th></tr></thead>
            <tbody>
              {data.runs.map((r) => (
                <tr key={r.id} data-run-id={r.id} data-status={r.status}>
                  <td><a href={`#/dashboard/runs/${r.id}`}>run {r.id}</a></td>
                  <td><span class={`badge st-${r.status}`}>{r.status}</span></td><td>{r.trigger}</td>
                  <td>{(r.task || '').slice(0, 160)}</td><td><Time iso={r.created_at} /></td><td>{duration(r.duration_ms)}</td>
                  <td>{num(r.tokens_in)}</td><td>{num(r.tokens_out)}</td>
                  <td data-cost>{r.cost_usd == null ? '' : <ValueBar value={r.cost_usd} max={maxCost(data.runs)} label={usd(r.cost_usd)} />}</td>
                </tr>
              ))}
              {data.runs.length === 0 && <EmptyRow cols={9}>{status || trigger ? 'No runs match these filters.' : 'No runs yet: ask something in the chat and its run shows here.'}</EmptyRow>}
            </tbody>
            {data.runs.length > 0 && (
              <tfoot><tr data-runs-total>
                <th scope="row" colSpan={6}>Total of these {data.runs.length} run{data.runs.length === 1 ? '' : 's'}</th>
                <td>{num(sum(data.runs, 'tokens_in'))}</td><td>{num(sum(data.runs, 'tokens_out'))}</td><td>{usd(sum(data.runs, 'cost_usd'))}</td>
              </tr></tfoot>
            )}
          </table>
          <p>
            <button type="button" class="secondary" disabled={!cursor.length} onClick={() => setCursor(cursor.slice(0, -1))}>Newer runs</button>{' '}
            <button type="button" class="secondary" disabled={!data.next_before_id} onClick={() => setCursor([...cursor, data.next_before_id])}>Older runs</button>
          </p>
        </>
      )}
    </>
  );
}

export function Runs({ args }) {
  const runId = args && args[0] && /^\d+$/.test(args[0]) ? Number(args[0]) : null;
  return (<><h2>Runs</h2>{runId ? <RunDetail runId={runId} /> : <RunList />}</>);
}
