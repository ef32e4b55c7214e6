// The evidence under an answer: one numbered source per worker of its run, titled from its task,
// with its outcome and time, a preview of its summary and of the command it ran; a source opens the
// worker on its result and tool output (#/dashboard/workers/<job>).
import { useEffect, useState } from 'preact/hooks';
import { get } from '../api.js';
import { duration } from '../format.js';

const MARKS = { success: '✓', failed: '✗', timeout: '✗', cancelled: '–' };
const FINISHED = new Set(Object.keys(MARKS));
const docs = new Map(); // run id → its document (a promise): one request per run however many turns show it

/** The run document, kept once every worker of it has finished and has its summary or error. */
export function runWorkers(runId) {
  if (!docs.has(runId)) {
    const loading = get(`/api/jarvis/runs/${runId}`).then((doc) => {
      const settled = (doc.workers || []).every((w) => FINISHED.has(w.status) && (w.summary || w.error));
      if (!settled) docs.delete(runId); // a later look asks again
      return doc.workers || [];
    });
    loading.catch(() => docs.delete(runId));
    docs.set(runId, loading);
  }
  return docs.get(runId);
}

function Source({ n, id, w }) {
  const status = w ? w.status : null;
  return (
    <li data-job-id={id} data-status={status || undefined} class="source">
      <a href={`#/dashboard/workers/${id}`} class="source-title">
        <span class="source-n">[{n}]</span> {w ? w.title || w.task : `Worker ${id}`}
      </a>
      {status && <span class={`source-mark mark-${status}`} role="img" title={status} aria-label={status}>{MARKS[status] || '…'}</span>}
      {w && w.duration_ms != null && <span class="muted source-dur">{duration(w.duration_ms)}</span>}
      {w && (w.summary || (w.error && status !== 'success')) && (
        <span class="source-preview" data-preview>{w.summary || w.error}</span>
      )}
      {w && w.command && <code class="source-cmd" data-command>$ {w.command}</code>}
    </li>
  );
}

/** The answer's sources: from `jobIds` at once (a link each), titled once the run document loads. */
export function Sources({ runId, jobIds }) {
  const [workers, setWorkers] = useState(null);
  const key = (jobIds || []).join(',');
  useEffect(() => {
    if (!runId) return undefined;
    let stop = false;
    runWorkers(runId).then((ws) => { if (!stop) setWorkers(ws); }).catch(() => { /* the links stay */ });
    return () => { stop = true; };
  }, [runId, key]);
  const byId = new Map((workers || []).map((w) => [w.job_id, w]));
  const ids = jobIds && jobIds.length ? jobIds : (workers || []).map((w) => w.job_id);
  if (!ids.length) return null;
  return (
    <div class="sources" role="group" aria-label="Sources">
      <ol>{ids.map((id, i) => <Source key={id} n={i + 1} id={id} w={byId.get(id)} />)}</ol>
    </div>
  );
}
