// A supervisor run inside its assistant turn: a collapsible progress block ("Working · 3 workers ·
// 0:14", a live row per worker), which folds to "Used 3 workers · 2.4 s · $0.004" once the run ends
// and stays with that turn (after the next question and after a reload: the run document's workers).
import { useEffect, useState } from 'preact/hooks';
import { duration } from '../format.js';
import { plainReason, repeatsRun } from './errors.js';
import { clock, heading, phrase } from './steps.js';

const LIVE = new Set(['spawned', 'queued', 'running']);

function WorkerRow({ w, now, runError, onRetry }) {
  const live = LIVE.has(w.status);
  const failed = w.status === 'failed' || w.status === 'timeout';
  // A failed worker says why; a job stopped with its run says nothing of its own (the turn says how the
  // run ended, once).
  const reason = failed && w.error && !repeatsRun(w.error, runError) ? w.error : '';
  return (
    <li data-job-id={w.job_id} data-status={w.status} class={`worker st-${w.status}`}>
      <div class="worker-head">
        {live ? <span class="spinner" aria-hidden="true" /> : <span class={`mark mark-${w.status}`} aria-hidden="true" />}
        <span class="task" title={w.task}>{w.task || `job ${w.job_id}`}</span>
        <span class="badge">{w.status}</span>
        <span class="dur">{w.duration_ms != null ? duration(w.duration_ms) : live && w.seenAt ? clock(now - w.seenAt) : ''}</span>
      </div>
      {w.summary && <p class="summary">{w.summary}</p>}
      {failed && <p class="werr">{reason ? `Why: ${plainReason(reason)}` : `This worker ${w.status === 'timeout' ? 'ran out of time' : 'failed'} without saying why.`}</p>}
      {w.status === 'timeout' && onRetry && <button type="button" class="secondary" onClick={() => onRetry(w.job_id)}>Retry</button>}
    </li>
  );
}

/** The progress block of one run's turn. `run`: {runId, active, status, startedAt, durationMs, costUsd,
 * order, workers, thinking, approvals, error}. */
export function Steps({ run, onRetry }) {
  const [now, setNow] = useState(Date.now());
  const [userOpen, setUserOpen] = useState(null); // the owner's own open/close wins over the default
  useEffect(() => {
    if (!run.active) return undefined;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [run.active]);
  const waiting = run.active && (run.approvals || []).some((a) => a.status === 'pending');
  const workers = run.order.map((id) => run.workers[id]).filter(Boolean);
  const open = userOpen ?? run.active;
  if (!run.active && !workers.length && !run.loaded) return null; // a past turn whose run is still loading
  return (
    // The block's clocks tick every second: only the line saying what happens is announced.
    <section class={`steps${run.active ? ' live' : ''}`} role="status" aria-live="off" aria-label="Workers"
      data-run-id={run.runId}>
      <details open={open} onToggle={(e) => { if (e.currentTarget.open !== open) setUserOpen(e.currentTarget.open); }}>
        <summary>
          {run.active && <span class="spinner" aria-hidden="true" />}
          <span class="steps-head">{heading(run, now)}</span>
        </summary>
        {workers.length > 0 && (
          <ul class="workers">
            {workers.map((w) => <WorkerRow key={w.job_id} w={w} now={now} runError={run.error} onRetry={onRetry} />)}
          </ul>
        )}
      </details>
      {run.active && <p class={`doing${waiting ? ' waiting' : ''}`} aria-live="polite">{run.cancelling ? 'Stopping the workers…' : waiting ? 'Waiting for your approval…' : phrase(run)}</p>}
    </section>
  );
}
