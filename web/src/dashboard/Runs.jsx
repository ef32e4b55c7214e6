// Runs: the list (filters, paging) and one run's timeline with the time between its events and
// its usage per component.
import { useState } from 'preact/hooks';
import { get, qs } from '../api.js';
import { cardsForRun } from '../approvals.js';
import { ApprovalCard } from '../chat/ApprovalCard.jsx';
import { between, duration, num, usd, when } from '../format.js';
import { ErrorLine, useLoad } from './common.jsx';
import { EmptyRow, Time, ValueBar } from './common.jsx';

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

function RunDetail({ runId }) {
  const run = useLoad(() => get(`/api/jarvis/runs/${runId}`), [runId]);
  const events = useLoad(() => get(`/api/jarvis/runs/${runId}/events`), [runId]);
  // Its approvals waiting for the owner (a push notification's body opens this page): answerable here.
  const waiting = useLoad(() => get('/api/jarvis/approvals').then((l) => cardsForRun(l.approvals, runId)), [runId]);
  const answered = (a) => waiting.setData((xs) => xs.map((x) => (x.id === a.id ? a : x)));
  const r = run.data;
  const evs = events.data ? events.data.events : [];
  const t0 = evs.length ? evs[0].created_at : null;
  return (
    <>
      <p><a href="#/dashboard/runs">← All runs</a></p>
      <h3>Run {runId}</h3>
      <ErrorLine error={run.error} />
      {r && (
        <>
          <dl class="facts">
            <dt>Status</dt><dd><span class={`badge st-${r.status}`}>{r.status}</span>{r.budget_stopped && <> <span class="badge" data-budget-stopped>stopped at its budget</span></>}</dd>
            <dt>Trigger</dt><dd>{r.trigger}</dd>
            <dt>Task</dt><dd>{r.task}</dd>
            <dt>Started</dt><dd>{when(r.started_at)}</dd>
            <dt>Duration</dt><dd>{duration(r.duration_ms)}</dd>
            <dt>Tokens</dt><dd>{num(r.tokens_in)} in · {num(r.tokens_out)} out · {usd(r.cost_usd)}</dd>
          </dl>
          {waiting.data && waiting.data.length > 0 && (
            <section aria-label="Approvals" class="approvals">
              {waiting.data.map((a) => <ApprovalCard key={a.id} approval={a} onAnswered={answered} />)}
            </section>
          )}
          {r.result && <details open><summary>Answer</summary><pre class="wrap">{r.result}</pre></details>}
          {r.error && <p class="error">{r.error}</p>}
          <h4>Workers</h4>
          <ul>{r.workers.map((w) => (
            <li key={w.job_id} data-job-id={w.job_id} data-status={w.status}>
              <a href={`#/dashboard/workers/${w.job_id}`}>job {w.job_id}</a> <span class={`badge st-${w.status}`}>{w.status}</span> {w.task} {duration(w.duration_ms)}
              {w.usage && <span class="muted" data-worker-usage> · {num(w.usage.tokens_in + w.usage.tokens_out)} tokens · {usd(w.usage.cost_usd)}</span>}
            </li>))}
          </ul>
          <h4>Usage by component</h4>
          {r.usage_by_component ? (
            <table class="grid" aria-label="Run usage by component">
              <thead><tr><th>Component</th><th>Calls</th><th>Tokens in</th><th>Tokens out</th><th>USD</th></tr></thead>
              <tbody>{r.usage_by_component.map((u) => (
                <tr key={u.component}><td>{u.component}</td><td>{num(u.calls)}</td><td>{num(u.tokens_in)}</td><td>{num(u.tokens_out)}</td><td>{usd(u.cost_usd)}</td></tr>
              ))}</tbody>
            </table>
          ) : <p class="muted">not available</p>}
        </>
      )}
      <h4>Timeline</h4>
      <ErrorLine error={events.error} />
      <ol class="timeline" aria-label="Run timeline">
        {evs.map((e, i) => (
          <li key={e.id} data-event-type={e.event_type}>
            <span class="muted">+{duration(between(t0, e.created_at))}</span>
            {i > 0 && <span class="muted"> (Δ {duration(between(evs[i - 1].created_at, e.created_at))})</span>}{' '}
            <strong>{e.event_type}</strong>{' '}
            <code class="small">{JSON.stringify(e.payload).slice(0, 300)}</code>
          </li>
        ))}
      </ol>
    </>
  );
}

export function Runs({ args }) {
  const runId = args && args[0] && /^\d+$/.test(args[0]) ? Number(args[0]) : null;
  return (<><h2>Runs</h2>{runId ? <RunDetail runId={runId} /> : <RunList />}</>);
}
