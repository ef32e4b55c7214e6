// The worker browser: filter by status, time and text; a worker's files; tool output read in
// byte ranges; thread.jsonl as a conversation.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, describe, get, qs } from '../api.js';
import { bytes, contentRange, duration, parseJsonl, when, workerFileUrl } from '../format.js';
import { ErrorLine, useLoad } from './common.jsx';

const STATUSES = ['', 'queued', 'running', 'success', 'failed', 'timeout', 'cancelled'];
export const RANGE_BYTES = 64 * 1024;

function matches(w, { from, to, search }) {
  const created = (w.created_at || '').slice(0, 10);
  if (from && created < from) return false;
  if (to && created > to) return false;
  if (search) {
    const hay = `${w.task || ''} ${w.summary || ''} ${w.error || ''} ${w.job_id}`.toLowerCase();
    if (!hay.includes(search.toLowerCase())) return false;
  }
  return true;
}

function WorkerList() {
  const [filters, setFilters] = useState({ status: '', from: '', to: '', search: '' });
  const [pages, setPages] = useState([]);
  const [next, setNext] = useState(null);
  const [error, setError] = useState('');
  const set = (k) => (e) => setFilters({ ...filters, [k]: e.currentTarget.value });

  const sinceHours = filters.from ? Math.min(24 * 366, Math.max(1, Math.ceil((Date.now() - new Date(`${filters.from}T00:00:00Z`).getTime()) / 3600e3))) : undefined;
  const load = async (before) => {
    try {
      const page = await get(`/api/jarvis/workers${qs({ limit: 200, status: filters.status, since_hours: sinceHours, before_id: before })}`);
      setPages((p) => (before ? [...p, ...page.workers] : page.workers));
      setNext(page.next_before_id);
      setError('');
    } catch (err) {
      setError(describe(err));
    }
  };
  useEffect(() => { load(); }, [filters.status, filters.from]);
  const shown = pages.filter((w) => matches(w, filters));

  return (
    <>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Worker filters">
        <label>Status <select value={filters.status} onChange={set('status')}>
          {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}
        </select></label>
        <label>From <input type="date" value={filters.from} onInput={set('from')} /></label>
        <label>To <input type="date" value={filters.to} onInput={set('to')} /></label>
        <label>Search <input type="search" value={filters.search} onInput={set('search')} /></label>
      </form>
      <ErrorLine error={error} />
      <table class="grid">
        <caption class="sr-only">Workers, newest first</caption>
        <thead><tr><th>Job</th><th>Status</th><th>Task</th><th>Summary</th><th>Duration</th><th>Created</th><th>Run</th></tr></thead>
        <tbody>
          {shown.map((w) => (
            <tr key={w.job_id} data-job-id={w.job_id} data-status={w.status}>
              <td><a href={`#/dashboard/workers/${w.job_id}`}>job {w.job_id}</a></td>
              <td><span class={`badge st-${w.status}`}>{w.status}</span></td>
              <td>{w.task}</td>
              <td>{w.summary || w.error || ''}</td>
              <td>{duration(w.duration_ms)}</td>
              <td>{when(w.created_at)}</td>
              <td><a href={`#/dashboard/runs/${w.run_id}`}>run {w.run_id}</a></td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 && !error && <p>No workers match.</p>}
      {next && <button type="button" class="secondary" onClick={() => load(next)}>Load more workers</button>}
    </>
  );
}

/** One file: whole when small, else in ranges; thread.jsonl as a conversation. */
function FileView({ jobId, file }) {
  const [range, setRange] = useState({ start: 0 });
  const [view, setView] = useState(null);
  const [error, setError] = useState('');
  useEffect(() => { setRange({ start: 0 }); }, [file.path]);
  useEffect(() => {
    let stop = false;
    (async () => {
      setError('');
      if (file.size === 0) { setView({ text: '', start: 0, end: -1, total: 0 }); return; }
      try {
        const end = range.start + RANGE_BYTES - 1;
        const resp = await fetch(workerFileUrl(jobId, file.path), { credentials: 'same-origin', headers: { Range: `bytes=${range.start}-${end}` } });
        if (!resp.ok) {
          let message = `${resp.status}`;
          try { message = (await resp.json()).message; } catch { /* not JSON */ }
          throw new ApiError(resp.status, 'file', message);
        }
        const buf = await resp.arrayBuffer();
        const text = new TextDecoder('utf-8', { fatal: false }).decode(buf);
        const cr = contentRange(resp.headers.get('content-range'));
        const total = cr ? cr.total : buf.byteLength;
        if (!stop) setView({ text, start: cr ? cr.start : 0, end: cr ? cr.end : buf.byteLength - 1, total });
      } catch (err) {
        if (!stop) { setError(describe(err)); setView(null); }
      }
    })();
    return () => { stop = true; };
  }, [jobId, file.path, range.start]);

  const isThread = file.path.endsWith('thread.jsonl');
  const whole = view && view.start === 0 && view.end >= view.total - 1;
  return (
    <section class="file" aria-label={`File ${file.path}`}>
      <h4>{file.path} <span class="muted">{bytes(file.size)}</span></h4>
      <ErrorLine error={error} />
      {view && !whole && (
        <p class="range">
          Bytes {view.start}–{view.end} of {view.total}{' '}
          <button type="button" class="secondary" disabled={view.start === 0}
            onClick={() => setRange({ start: Math.max(0, view.start - RANGE_BYTES) })}>Previous range</button>{' '}
          <button type="button" class="secondary" disabled={view.end >= view.total - 1}
            onClick={() => setRange({ start: view.end + 1 })}>Next range</button>
        </p>
      )}
      {view && isThread && whole ? (
        <div class="conversation" aria-label="Worker conversation">
          {parseJsonl(view.text).map((m, i) => (
            <article key={i} data-role={m.role} class={`msg msg-${m.role}`}>
              <h5>{m.role}{m.name ? ` · ${m.name}` : ''}</h5>
              {m.content && <pre class="wrap">{m.content}</pre>}
              {m.calls && <pre class="wrap calls">{m.calls}</pre>}
            </article>
          ))}
        </div>
      ) : view && <pre aria-label="File content" class="content">{view.text}</pre>}
    </section>
  );
}

function WorkerDetail({ jobId }) {
  const { data: w, error } = useLoad(() => get(`/api/jarvis/workers/${jobId}`), [jobId]);
  const [open, setOpen] = useState(null);
  return (
    <>
      <p><a href="#/dashboard/workers">← All workers</a></p>
      <h3>Job {jobId}</h3>
      <ErrorLine error={error} />
      {w && (
        <>
          <dl class="facts">
            <dt>Status</dt><dd><span class={`badge st-${w.status}`}>{w.status}</span></dd>
            <dt>Task</dt><dd>{w.task}</dd>
            <dt>Run</dt><dd><a href={`#/dashboard/runs/${w.run_id}`}>run {w.run_id}</a></dd>
            <dt>Worker id</dt><dd>{w.worker_id || '—'}</dd>
          </dl>
          {w.metadata && <details><summary>Metadata</summary><pre class="wrap">{JSON.stringify(w.metadata, null, 2)}</pre></details>}
          <h4>Files</h4>
          {w.files.length === 0 && <p>No files yet.</p>}
          <ul class="files">
            {w.files.map((f) => (
              <li key={f.path}>
                {f.kind === 'file'
                  ? <button type="button" class="link" aria-pressed={open?.path === f.path} onClick={() => setOpen(f)}>{f.path}</button>
                  : <span>{f.path} <span class="muted">({f.kind}: not readable)</span></span>}
                {' '}<span class="muted">{bytes(f.size)}</span>
              </li>
            ))}
          </ul>
          {open && <FileView jobId={jobId} file={open} />}
        </>
      )}
    </>
  );
}

export function Workers({ args }) {
  const jobId = args && args[0] && /^\d+$/.test(args[0]) ? Number(args[0]) : null;
  return (
    <>
      <h2>Workers</h2>
      {jobId ? <WorkerDetail jobId={jobId} /> : <WorkerList />}
    </>
  );
}
