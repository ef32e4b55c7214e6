// The worker browser: filter by status, time and text; a worker on its result with the commands it
// ran; its files read in byte ranges (jump to the end, search the loaded range, download);
// thread.jsonl as a conversation.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, describe, get, qs } from '../api.js';
import { bytes, contentRange, duration, parseJsonl, workerFileUrl } from '../format.js';
import { ErrorLine, Time, useLoad } from './common.jsx';

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
              <td><Time iso={w.created_at} /></td>
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

const FILE_WHOLE_MAX = 5_000_000; // the server serves (and downloads) a file whole up to this size

/** Save `text` as a file named `name` (a range of a file too large to download whole). */
function saveText(text, name) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** `text` with every case-insensitive match of `query` marked; the `current` one also `data-current`. */
function Marked({ text, query, current }) {
  if (!query) return text;
  const parts = [];
  const hay = text.toLowerCase();
  const needle = query.toLowerCase();
  let at = 0;
  let n = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + needle.length)) {
    parts.push(text.slice(at, i));
    parts.push(<mark key={n} data-current={n === current ? '' : undefined}>{text.slice(i, i + needle.length)}</mark>);
    at = i + needle.length;
    n += 1;
  }
  parts.push(text.slice(at));
  return parts;
}

export function countMatches(text, query) {
  if (!query) return 0;
  const hay = text.toLowerCase();
  const needle = query.toLowerCase();
  let n = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + needle.length)) n += 1;
  return n;
}

/** One file: whole when small, else in ranges (the first, the next, the previous, the last);
 * search within the loaded range; download; thread.jsonl as a conversation. */
function FileView({ jobId, file }) {
  const [range, setRange] = useState({ start: 0 }); // {start} or {tail: true}: the file's last bytes
  const [view, setView] = useState(null);
  const [error, setError] = useState('');
  const [query, setQuery] = useState('');
  const [current, setCurrent] = useState(0);
  const [atEnd, setAtEnd] = useState(0); // asks the loaded text to scroll to its end
  const preRef = useRef(null);
  useEffect(() => { setRange({ start: 0 }); setQuery(''); }, [file.path]);
  useEffect(() => {
    let stop = false;
    (async () => {
      setError('');
      if (file.size === 0) { setView({ text: '', start: 0, end: -1, total: 0 }); return; }
      try {
        const wanted = range.tail ? `bytes=-${RANGE_BYTES}` : `bytes=${range.start}-${range.start + RANGE_BYTES - 1}`;
        const resp = await fetch(workerFileUrl(jobId, file.path), { credentials: 'same-origin', headers: { Range: wanted } });
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
  }, [jobId, file.path, range.start, range.tail]);

  const matches = view ? countMatches(view.text, query) : 0;
  useEffect(() => { setCurrent(0); }, [query, view && view.start]);
  // The current match in view; or, after "Jump to end", the end of the text.
  useEffect(() => {
    const pre = preRef.current;
    if (!pre) return;
    const mark = query && pre.querySelector('mark[data-current]');
    if (mark) mark.scrollIntoView({ block: 'center' });
  }, [query, current, view]);
  useEffect(() => {
    const pre = preRef.current;
    if (pre && atEnd) pre.scrollTop = pre.scrollHeight;
  }, [atEnd, view]);

  const jumpToEnd = () => {
    if (view && view.end < view.total - 1) setRange({ tail: true });
    setAtEnd((n) => n + 1);
  };
  const step = (d) => setCurrent((c) => (matches ? (c + d + matches) % matches : 0));
  const isThread = file.path.endsWith('thread.jsonl');
  const whole = view && view.start === 0 && view.end >= view.total - 1;
  const name = file.path.split('/').pop();
  return (
    <section class="file" aria-label={`File ${file.path}`}>
      <h4>{file.path} <span class="muted">{bytes(file.size)}</span></h4>
      <ErrorLine error={error} />
      {view && (
        <div class="file-tools" role="toolbar" aria-label="File tools">
          {!whole && <span class="range" data-range>Bytes {view.start.toLocaleString('en')}–{view.end.toLocaleString('en')} of {view.total.toLocaleString('en')}</span>}
          {!whole && <button type="button" class="secondary" disabled={view.start === 0}
            onClick={() => setRange({ start: Math.max(0, view.start - RANGE_BYTES) })}>Previous range</button>}
          {!whole && <button type="button" class="secondary" disabled={view.end >= view.total - 1}
            onClick={() => setRange({ start: view.end + 1 })}>Next range</button>}
          <button type="button" class="secondary" onClick={() => { setAtEnd(0); setRange({ start: 0 }); if (preRef.current) preRef.current.scrollTop = 0; }}>Jump to start</button>
          <button type="button" class="secondary" onClick={jumpToEnd}>Jump to end</button>
          <label class="file-search">Search in file{' '}
            <input type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)}
              onKeyDown={(e) => { if (e.key === 'Enter') { e.preventDefault(); step(e.shiftKey ? -1 : 1); } }} />
          </label>
          {query && <>
            <span role="status" data-matches={matches}>
              {matches ? `${current + 1} of ${matches}` : 'no match'}{whole ? '' : ' in the loaded range'}
            </span>
            <button type="button" class="secondary" disabled={!matches} onClick={() => step(-1)} aria-label="Previous match">↑</button>
            <button type="button" class="secondary" disabled={!matches} onClick={() => step(1)} aria-label="Next match">↓</button>
          </>}
          {file.size <= FILE_WHOLE_MAX
            ? <a class="button secondary" href={workerFileUrl(jobId, file.path)} download={name}>Download</a>
            : <button type="button" class="secondary" onClick={() => saveText(view.text, `${name}.bytes-${view.start}-${view.end}`)}>
              Download the loaded range</button>}
        </div>
      )}
      {view && isThread && whole && !query ? (
        <div class="conversation" aria-label="Worker conversation">
          {parseJsonl(view.text).map((m, i) => (
            <article key={i} data-role={m.role} class={`msg msg-${m.role}`}>
              <h5>{m.role}{m.name ? ` · ${m.name}` : ''}</h5>
              {m.content && <pre class="wrap">{m.content}</pre>}
              {m.calls && <pre class="wrap calls">{m.calls}</pre>}
            </article>
          ))}
        </div>
      ) : view && <pre role="region" aria-label="File content" class="content" ref={preRef} tabindex="0"><Marked text={view.text} query={query} current={current} /></pre>}
    </section>
  );
}

const MARKS = { success: '✓', failed: '✗', timeout: '✗', cancelled: '–' };

/** The worker on its result: what it was asked, how it went, the commands it ran (each opening its
 * output) and the file viewer; `#/dashboard/workers/<job>/<file, encoded>` opens that file. */
function WorkerDetail({ jobId, path }) {
  const { data: w, error } = useLoad(() => get(`/api/jarvis/workers/${jobId}`), [jobId]);
  const [chosen, setChosen] = useState(null);
  const meta = (w && w.metadata) || {};
  // The index row's word (the API's), else metadata.json's (a worker still running).
  const calls = w && w.tool_calls && w.tool_calls.length ? w.tool_calls : (Array.isArray(meta.tool_calls) ? meta.tool_calls : []);
  const took = w && w.duration_ms != null ? w.duration_ms : meta.duration_ms;
  const summary = (w && w.summary) || meta.summary;
  const why = (w && w.error) || meta.error;
  const files = w ? w.files : [];
  const wanted = chosen || path || 'result.txt';
  const open = files.find((f) => f.path === wanted && f.kind === 'file') || null;
  const choose = (p) => {
    setChosen(p);
    history.replaceState(null, '', `#/dashboard/workers/${jobId}/${encodeURIComponent(p)}`);
  };
  return (
    <>
      <p><a href="#/dashboard/workers">← All workers</a></p>
      <h3>Job {jobId}</h3>
      <ErrorLine error={error} />
      {w && (
        <>
          <dl class="facts">
            <dt>Status</dt><dd><span class={`badge st-${w.status}`}>{MARKS[w.status] ? `${MARKS[w.status]} ` : ''}{w.status}</span>
              {took != null && <span class="muted"> · {duration(took)}</span>}</dd>
            <dt>Task</dt><dd>{w.task}</dd>
            {summary && <><dt>Summary</dt><dd data-summary>{summary}</dd></>}
            {why && w.status !== 'success' && <><dt>Why</dt><dd class="error">{why}</dd></>}
            <dt>Run</dt><dd><a href={`#/dashboard/runs/${w.run_id}`}>run {w.run_id}</a></dd>
            <dt>Worker id</dt><dd>{w.worker_id || '—'}</dd>
          </dl>
          {calls.length > 0 && (
            <>
              <h4>Tool calls</h4>
              <ol class="calls" aria-label="Tool calls">
                {calls.map((c, i) => (
                  <li key={c.path || i} data-path={c.path} data-ok={c.ok ? 'true' : 'false'}>
                    <button type="button" class="link" aria-pressed={open?.path === c.path} disabled={!c.path}
                      onClick={() => choose(c.path)}>{c.command ? `$ ${c.command}` : `${c.tool} (call ${i + 1})`}</button>
                    <span class="muted"> · {c.tool}{c.exit_code != null ? ` · exit ${c.exit_code}` : ''}{c.exit_signal ? ` · ${c.exit_signal}` : ''}
                      {c.duration_ms != null ? ` · ${duration(c.duration_ms)}` : ''}</span>
                  </li>
                ))}
              </ol>
            </>
          )}
          {open && <FileView jobId={jobId} file={open} />}
          <h4>Files</h4>
          {w.files.length === 0 && <p>No files yet.</p>}
          <ul class="files">
            {w.files.map((f) => (
              <li key={f.path}>
                {f.kind === 'file'
                  ? <button type="button" class="link" aria-pressed={open?.path === f.path} onClick={() => choose(f.path)}>{f.path}</button>
                  : <span>{f.path} <span class="muted">({f.kind}: not readable)</span></span>}
                {' '}<span class="muted">{bytes(f.size)}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

function safeDecode(s) {
  try { return decodeURIComponent(s); } catch { return null; }
}

export function Workers({ args }) {
  const jobId = args && args[0] && /^\d+$/.test(args[0]) ? Number(args[0]) : null;
  return (
    <>
      <h2>Workers</h2>
      {jobId ? <WorkerDetail key={jobId} jobId={jobId} path={args[1] ? safeDecode(args[1]) : null} /> : <WorkerList />}
    </>
  );
}
