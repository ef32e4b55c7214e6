// One run: its facts, its approvals, the answer (markdown, as the chat renders it), the trace
// waterfall (its kept spans, else built from its events: the supervisor's turns, each worker with its
// tool calls nested, latency bars, tokens, cost and status per span, payloads folded), its workers,
// usage by component, and the timeline of its events. A run still going is redrawn as its events come.
import { useEffect } from 'preact/hooks';
import { get, qs } from '../api.js';
import { cardsForRun } from '../approvals.js';
import { ApprovalCard } from '../chat/ApprovalCard.jsx';
import { Answer } from '../chat/Answer.jsx';
import { between, duration, num, usd } from '../format.js';
import { follow } from '../stream.js';
import { ErrorLine, Time, useLoad } from './common.jsx';
import { fromEvents, kindOf, labelOf, layout, timeline } from './waterfall.js';

const UNFINISHED = new Set(['queued', 'running', 'awaiting_approval']);
const STATUS_WORDS = { ok: 'ok', unset: 'ok', error: 'error', running: 'running', cancelled: 'cancelled' };

function payloadOf(span) {
  const body = span.attributes || span.payload;
  return body && typeof body === 'object' && Object.keys(body).length > 0 ? body : null;
}

function SpanRow({ span, depth, place, titles }) {
  const kind = kindOf(span);
  const bar = place(span);
  const status = STATUS_WORDS[span.status] || span.status;
  const tokens = span.tokens_in || span.tokens_out ? `${num(span.tokens_in)} in · ${num(span.tokens_out)} out` : '';
  const payload = payloadOf(span);
  const label = labelOf(span, titles);
  const cells = (
    <>
      <span class="wf-name" style={{ paddingLeft: `${depth * 1.1}em` }} title={`${label} (${span.name})`}>{label}</span>
      <span class="wf-track" aria-hidden="true">
        <span class={`wf-bar wf-${kind} wf-st-${status}`} style={{ left: `${bar.left.toFixed(3)}%`, width: `${Math.min(bar.width, 100 - bar.left).toFixed(3)}%` }} />
      </span>
      <span class="wf-dur">{duration(span.duration_ms)}</span>
      <span class="wf-tok muted">{tokens}</span>
      <span class="wf-usd muted">{span.cost_usd ? usd(span.cost_usd) : ''}</span>
      <span class={`badge st-${status === 'ok' ? 'success' : status === 'error' ? 'failed' : status}`}>{status}</span>
    </>
  );
  // A row opens on its payload (attributes, or the events' details), folded until asked for.
  return (
    <li data-kind={kind} data-status={status} data-worker={span.job_id ?? span.attributes?.['zerg.job.id']}>
      {payload ? (
        <details class="wf-span">
          <summary class="wf-row">{cells}</summary>
          <pre class="wrap wf-payload">{JSON.stringify(payload, null, 2)}</pre>
        </details>
      ) : <div class="wf-span"><div class="wf-row">{cells}</div></div>}
      {span.status_message && status !== 'ok' && (
        <p class="error wf-why" style={{ paddingLeft: `${depth * 1.1 + 1}em` }}>{span.status_message}</p>
      )}
      {span.children.length > 0 && (
        <ol>{span.children.map((c) => <SpanRow key={c.span_id} span={c} depth={depth + 1} place={place} titles={titles} />)}</ol>
      )}
    </li>
  );
}

/** The waterfall: spans when the run kept them, else built from its events. */
export function Waterfall({ run, events, trace }) {
  // The spans once the run's root span is kept (written when the run closes); until then, and for a
  // run that kept none, the events: a running run's workers are there live, their spans only at their end.
  const fromSpans = !!(trace && trace.spans && trace.spans.some((sp) => kindOf(sp) === 'run'));
  const roots = fromSpans ? trace.spans : fromEvents(run, events);
  const { place, total } = layout(roots);
  const titles = Object.fromEntries((run.workers || []).map((w) => [w.job_id, w.title || w.task]));
  return (
    <section class="waterfall" aria-label="Trace" data-source={fromSpans ? 'spans' : 'events'}>
      <p class="muted">
        {fromSpans ? `From the run's spans (trace ${trace.trace_id})`
          : trace && trace.spans && trace.spans.length ? 'From the run\'s events (its spans are drawn once it has closed)'
            : 'From the run\'s events (it kept no spans)'}
        {' · '}{duration(total)}
      </p>
      <div class="wf-head" aria-hidden="true"><span>Span</span><span>0 – {duration(total)}</span><span>Time</span><span>Tokens</span><span>USD</span><span>Status</span></div>
      <ol class="wf-tree" aria-label="Trace waterfall">
        {roots.map((s) => <SpanRow key={s.span_id} span={s} depth={0} place={place} titles={titles} />)}
      </ol>
    </section>
  );
}

export function RunDetail({ runId }) {
  const run = useLoad(() => get(`/api/jarvis/runs/${runId}`), [runId]);
  const events = useLoad(() => get(`/api/jarvis/runs/${runId}/events`), [runId]);
  // The kept spans, if any (an older server without the route: the events alone).
  const trace = useLoad(() => get(`/api/jarvis/runs/${runId}/trace`).catch(() => ({ spans: [] })), [runId]);
  // A run still going: its stream's events redraw the page (coalesced), until its terminal event.
  const going = !!(run.data && UNFINISHED.has(run.data.status));
  useEffect(() => {
    if (!going) return undefined;
    let pending = null;
    const refresh = (type) => {
      if (type === 'answer_delta' || pending) return; // the answer's words: its final event redraws
      pending = setTimeout(() => { pending = null; run.reload(); events.reload(); trace.reload(); }, 250);
    };
    const stream = follow(`/api/jarvis/supervisor/events${qs({ run_id: runId })}`, { onEvent: refresh });
    return () => { stream.close(); if (pending) clearTimeout(pending); };
  }, [runId, going]);
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
            <dt>Started</dt><dd><Time iso={r.started_at} /></dd>
            <dt>Duration</dt><dd>{duration(r.duration_ms)}</dd>
            <dt>Tokens</dt><dd>{num(r.tokens_in)} in · {num(r.tokens_out)} out · {usd(r.cost_usd)}</dd>
          </dl>
          {waiting.data && waiting.data.length > 0 && (
            <section aria-label="Approvals" class="approvals">
              {waiting.data.map((a) => <ApprovalCard key={a.id} approval={a} onAnswered={answered} />)}
            </section>
          )}
          {r.result && (
            <section aria-label="Answer" class="run-answer">
              <h4>Answer</h4>
              <Answer text={r.result} />
            </section>
          )}
          {r.error && <p class="error">{r.error}</p>}
          <h4>Trace</h4>
          {events.data && trace.data ? <Waterfall run={r} events={evs} trace={trace.data} /> : <p class="muted">Loading the trace…</p>}
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
        {timeline(evs).map(({ e, prev, n }) => (
          <li key={e.id} data-event-type={e.event_type}>
            <span class="muted">+{duration(between(t0, e.created_at))}</span>
            {prev && <span class="muted"> (Δ {duration(between(prev.created_at, e.created_at))})</span>}{' '}
            <strong>{e.event_type}</strong>{n > 1 && <span class="muted"> ×{n}</span>}
            {e.payload && Object.keys(e.payload).length > 0 && (
              <details class="payload"><summary>payload</summary><pre class="wrap small">{JSON.stringify(e.payload, null, 2)}</pre></details>
            )}
          </li>
        ))}
      </ol>
    </>
  );
}

