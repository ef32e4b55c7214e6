// The Jarvis client: the owner's one thread, every utterance routed (quick or supervisor), a run's
// workers live from its stream, the answer as safe markdown with its evidence, reload recovery.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, describe, get, isMissingRoute, post, qs } from '../api.js';
import { cardsForRun } from '../approvals.js';
import { duration } from '../format.js';
import { UTTERANCE_CHARS, nearLimit } from '../limits.js';
import { memo } from '../memo.js';
import { follow } from '../stream.js';
import { Answer } from './Answer.jsx';
import { withDelta, withFinalAnswer, withoutDraft } from './answerStream.js';
import { ApprovalCard } from './ApprovalCard.jsx';
import { Feed } from './Feed.jsx';
import { Push } from './Push.jsx';
import { Settings, loadPreferences } from './Settings.jsx';
import { Sources } from './Sources.jsx';
import { Voice, speak } from './Voice.jsx';

const PAGE = 30;
const CONTEXT_TURNS = 6;
const ESCALATION = 'I\'ll escalate this to the supervisor…';
let keySeq = 0;
const nextKey = () => `local-${++keySeq}`;
// A run the page follows: still going (waiting for the owner's approval is going, not stalled).
const UNFINISHED = new Set(['queued', 'running', 'awaiting_approval']);

/** A thread row (GET /api/jarvis/thread) as the page shows it. */
function fromThread(m) {
  const meta = m.metadata || {};
  const quick = meta.mode === 'quick' || meta.quick === true || meta.kind === 'quick';
  return { key: `m-${m.id}`, id: m.id, role: m.role, content: m.content || '', runId: m.run_id || null,
    mode: quick ? 'quick' : null, jobIds: Array.isArray(meta.job_ids) ? meta.job_ids : [] };
}

function Message({ m }) {
  if (m.role === 'notice') return <p class="notice">{m.content}</p>;
  if (m.role === 'error') return <p class="notice error" role="alert">{m.content}</p>;
  const assistant = m.role === 'assistant';
  return (
    <article data-role={m.role} data-mode={m.mode || undefined} data-run-id={assistant && m.runId ? m.runId : undefined}
      class={`msg msg-${m.role}`} aria-label={assistant ? (m.mode === 'quick' ? 'Jarvis (quick answer)' : 'Jarvis') : 'You'}>
      {assistant
        ? <Answer text={m.content} streaming={m.streaming} />
        : <p class="plain">{m.content}</p>}
      {assistant && m.jobIds && m.jobIds.length > 0 && <Sources runId={m.runId} jobIds={m.jobIds} />}
    </article>
  );
}

// A long thread: a message renders again only when it changed (not on every keystroke or page loaded).
const ShownMessage = memo(Message);

function WorkerRow({ w, onRetry }) {
  return (
    <li data-job-id={w.job_id} data-status={w.status} class={`worker st-${w.status}`}>
      <span class="badge">{w.status}</span> <span class="task">{w.task || `job ${w.job_id}`}</span>
      {w.duration_ms != null && <span class="dur"> · {duration(w.duration_ms)}</span>}
      {w.summary && <p class="summary">{w.summary}</p>}
      {w.error && w.status !== 'success' && <p class="werr">{w.error}</p>}
      {w.status === 'timeout' && <button type="button" onClick={() => onRetry(w.job_id)}>Retry</button>}
    </li>
  );
}

export function Chat({ visible }) {
  const [messages, setMessages] = useState([]);
  const [older, setOlder] = useState(null); // next_before_id
  const [loadError, setLoadError] = useState('');
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [run, setRun] = useState(null); // {runId, task, status, workers: {}, order: [], thinking}
  const [conn, setConn] = useState('live');
  const [feedConn, setFeedConn] = useState('live');
  const [readAloud, setReadAloud] = useState(false);
  const streamRef = useRef(null);
  const mine = useRef(new Set()); // runs this page started or follows (the feed does not announce them)
  const starting = useRef(0); // POSTs that start a run, in flight: their run_started may come first
  const isMine = (p) => mine.current.has(p.run_id) || (starting.current > 0 && p.trigger === 'api');
  const inputRef = useRef(null);
  const logRef = useRef(null);
  const readRef = useRef(readAloud);
  readRef.current = readAloud;

  const scrollDown = () => requestAnimationFrame(() => {
    const el = logRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  });
  const append = (...items) => { setMessages((ms) => [...ms, ...items]); scrollDown(); };

  // ---- history ---------------------------------------------------------------------------------
  const loadLatest = async () => {
    try {
      const page = await get(`/api/jarvis/thread${qs({ limit: PAGE })}`);
      const rows = page.messages.filter((m) => m.role === 'user' || m.role === 'assistant').map(fromThread);
      // Turns typed while the page was loading are kept after the stored ones, answered or not: a
      // quick answer that came back before this page of the thread is not lost, nor shown twice.
      const stored = new Set(rows.map((r) => r.id));
      setMessages((ms) => [...rows, ...ms.filter((m) => !(m.id && stored.has(m.id)) && !rows.some((r) => r.key === m.key))]);
      setOlder(page.next_before_id);
      setLoadError('');
      scrollDown();
      return page.messages;
    } catch (err) {
      setLoadError(describe(err));
      return [];
    }
  };
  const loadOlder = async () => {
    try {
      const page = await get(`/api/jarvis/thread${qs({ limit: PAGE, before_id: older })}`);
      const rows = page.messages.filter((m) => m.role === 'user' || m.role === 'assistant').map(fromThread);
      setMessages((ms) => [...rows.filter((r) => !ms.some((m) => m.id === r.id)), ...ms]);
      setOlder(page.next_before_id);
    } catch (err) {
      setLoadError(describe(err));
    }
  };

  // ---- a run's stream --------------------------------------------------------------------------
  const finishRun = (status) => setRun((r) => (r ? { ...r, status, active: false } : r));
  // The run document's word on its workers (a row whose last event was missed, e.g. after a cancel).
  const syncWorkers = (doc) => setRun((r) => {
    if (!r || r.runId !== doc.run_id) return r;
    const workers = { ...r.workers };
    const order = [...r.order];
    for (const w of doc.workers || []) {
      workers[w.job_id] = { ...(workers[w.job_id] || {}), ...w, summary: w.summary || workers[w.job_id]?.summary };
      if (!order.includes(w.job_id)) order.push(w.job_id);
    }
    return { ...r, workers, order };
  });

  // The run's approvals as cards, from the owner's list (live on the run's approval events, and after
  // a reload): pending ones to answer, answered ones with their outcome.
  const loadApprovals = async (runId) => {
    try {
      const list = await get('/api/jarvis/approvals');
      setRun((r) => (r && r.runId === runId ? { ...r, approvals: cardsForRun(list.approvals, runId, r.approvals) } : r));
    } catch { /* no approvals API on this server, or a blip: the next event loads them again */ }
  };
  const answered = (a) => setRun((r) => (r ? { ...r, approvals: (r.approvals || []).map((x) => (x.id === a.id ? a : x)) } : r));

  const fallbackToQuick = async (runId, task) => {
    try {
      const q = await post('/api/jarvis/quick', { utterance: task, failed_run_id: runId });
      append({ key: nextKey(), role: 'assistant', content: q.answer, mode: 'quick', id: q.message_ids?.[1] });
      if (readRef.current) speak(q.answer);
    } catch (err) {
      if (!isMissingRoute(err)) append({ key: nextKey(), role: 'error', content: describe(err) });
    }
  };

  const attach = (runId, task) => {
    if (streamRef.current) streamRef.current.close();
    mine.current.add(runId);
    const state = { runId, task, status: 'running', active: true, workers: {}, order: [], thinking: '', approvals: [] };
    setRun(state);
    loadApprovals(runId);
    let cancelled = false;
    const order = []; // job ids in spawn order: the answer's evidence while the run document loads
    const url = `/api/jarvis/supervisor/events${qs({ run_id: runId })}`;
    const onEvent = (type, p) => {
      if (type === 'supervisor_thinking') setRun((r) => ({ ...r, thinking: p.message || '' }));
      else if (type === 'answer_delta') setMessages((ms) => withDelta(ms, runId, p)); // the answer as it is written
      else if (type === 'approval_requested') {
        setRun((r) => ({ ...r, status: 'awaiting_approval' }));
        loadApprovals(runId);
      } else if (type === 'approval_answered') {
        setRun((r) => ({ ...r, status: r.status === 'awaiting_approval' ? 'running' : r.status,
          approvals: (r.approvals || []).map((a) => (a.id === p.approval_id && a.status === 'pending' ? { ...a, status: p.status } : a)) }));
        loadApprovals(runId);
      } else if (type.startsWith('worker_') && p.job_id != null) {
        setRun((r) => {
          const prev = r.workers[p.job_id] || { job_id: p.job_id, status: 'spawned', task: '' };
          const next = { ...prev };
          if (type === 'worker_spawned') { next.task = p.task || prev.task; next.status = prev.status || 'spawned'; }
          if (type === 'worker_started') next.status = prev.status === 'spawned' ? 'running' : prev.status;
          if (type === 'worker_complete') { next.status = p.status || 'success'; next.duration_ms = p.duration_ms; next.error = p.error; }
          if (type === 'worker_summary_ready') next.summary = p.summary;
          if (!order.includes(p.job_id)) order.push(p.job_id);
          return { ...r, workers: { ...r.workers, [p.job_id]: next }, order: [...order] };
        });
      } else if (type === 'supervisor_complete') {
        finishRun('success');
        loadApprovals(runId); // their last word (e.g. expired) if the page missed it
        const answer = { key: `run-${runId}`, role: 'assistant', runId, content: p.result || '', jobIds: [...order] };
        // Re-attached after the answer was stored (a reload): the thread shows it already.
        setMessages((ms) => withFinalAnswer(ms, answer)); // replaces the streamed draft
        scrollDown();
        if (readRef.current) speak(p.result || '');
        // The thread's own record carries the evidence (metadata.job_ids): use it when it differs.
        get(`/api/jarvis/runs/${runId}`).then((doc) => {
          const ids = (doc.workers || []).map((w) => w.job_id);
          if (ids.length) setMessages((ms) => ms.map((m) => (m.key === `run-${runId}` ? { ...m, jobIds: ids } : m)));
        }).catch(() => {});
      } else if (type === 'error') {
        finishRun('failed');
        setMessages((ms) => withoutDraft(ms, runId)); // half an answer is no answer
        loadApprovals(runId); // a cancel or failure while waiting: the cards say cancelled
        append({ key: `err-${runId}`, role: 'error', content: p.message || 'The run failed.' });
        get(`/api/jarvis/runs/${runId}`).then((doc) => {
          finishRun(doc.status);
          syncWorkers(doc);
          if (doc.budget_stopped) {  // stopped at its budget: its partial answer, never a quick model call
            setMessages((ms) => [...ms, { key: `run-${runId}`, role: 'assistant', runId, content: doc.result || '', jobIds: [] }]);
            return;
          }
          if (!cancelled && doc.status === 'failed') fallbackToQuick(runId, task || doc.task);
        }).catch(() => { if (!cancelled) fallbackToQuick(runId, task); });
      }
    };
    streamRef.current = follow(url, {
      onEvent,
      onState: (s) => setConn(s === 'reconnecting' ? 'reconnecting' : 'live'),
      shouldReconnect: async () => {
        try {
          const doc = await get(`/api/jarvis/runs/${runId}`);
          if (UNFINISHED.has(doc.status)) return true;
          finishRun(doc.status);
          return false;
        } catch (err) {
          return !(err instanceof ApiError && (err.status === 404 || err.status === 401));
        }
      },
    });
    return { markCancelled: () => { cancelled = true; } };
  };
  const cancelFlag = useRef(null);

  const startSupervisor = async (task, visibleMessages) => {
    const prefs = loadPreferences();
    const previous = visibleMessages.filter((m) => m.role === 'user' || m.role === 'assistant')
      .slice(-CONTEXT_TURNS).map((m) => ({ role: m.role, content: m.content.slice(0, UTTERANCE_CHARS) }));
    const body = { task, preferences: { verbosity: prefs.verbosity, notify_on_complete: prefs.notify } };
    if (previous.length) body.context = { previous_messages: previous };
    let accepted;
    starting.current += 1;
    try {
      accepted = await post('/api/jarvis/supervisor', body);
      mine.current.add(accepted.run_id);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 400 || err.status === 422) && /context|preferences/.test(err.message)) {
        accepted = await post('/api/jarvis/supervisor', { task }); // an older server: the task alone
      } else throw err;
    } finally {
      starting.current -= 1;
    }
    cancelFlag.current = attach(accepted.run_id, task);
  };

  const send = async () => {
    const utterance = text.trim();
    if (!utterance || busy) return;
    setBusy(true);
    setText('');
    const before = messages;
    const asked = nextKey();
    append({ key: asked, role: 'user', content: utterance });
    try {
      let mode = 'supervisor';
      const history = before.filter((m) => m.role === 'user' || m.role === 'assistant')
        .slice(-CONTEXT_TURNS).map((m) => ({ role: m.role, content: m.content.slice(0, 2000) }));
      if (run && run.active) mode = 'supervisor'; // a follow-up on a running task stays with the supervisor
      else {
        try {
          mode = (await post('/api/jarvis/route', { utterance, history })).mode;
        } catch (err) {
          if (!isMissingRoute(err)) throw err;
        }
      }
      if (mode === 'quick') {
        try {
          const q = await post('/api/jarvis/quick', { utterance });
          setMessages((ms) => ms.map((m) => (m.key === asked ? { ...m, id: q.message_ids?.[0] } : m)));
          append({ key: nextKey(), role: 'assistant', content: q.answer, mode: 'quick', id: q.message_ids?.[1] });
          if (readRef.current) speak(q.answer);
          return;
        } catch (err) {
          if (!isMissingRoute(err)) throw err;
        }
      }
      append({ key: nextKey(), role: 'notice', content: ESCALATION });
      await startSupervisor(utterance, [...before, { role: 'user', content: utterance }].slice(0, -1));
    } catch (err) {
      append({ key: nextKey(), role: 'error', content: describe(err) });
      setText((t) => t || utterance); // nothing lost: the text comes back to the input
    } finally {
      setBusy(false);
      inputRef.current?.focus();
    }
  };

  const cancel = async () => {
    if (!run) return;
    cancelFlag.current?.markCancelled();
    setRun((r) => ({ ...r, cancelling: true }));
    try {
      // The stream goes on: the workers' last events and the run's final error event follow.
      await post(`/api/jarvis/runs/${run.runId}/cancel`);
    } catch (err) {
      setRun((r) => ({ ...r, cancelling: false }));
      append({ key: nextKey(), role: 'error', content: describe(err) });
    }
  };

  const retry = async (jobId) => {
    starting.current += 1;
    try {
      const accepted = await post(`/api/jarvis/workers/${jobId}/retry`);
      mine.current.add(accepted.run_id);
      append({ key: nextKey(), role: 'notice', content: `Retrying job ${jobId} as run ${accepted.run_id}…` });
      cancelFlag.current = attach(accepted.run_id, run?.workers?.[jobId]?.task || '');
    } catch (err) {
      append({ key: nextKey(), role: 'error', content: describe(err) });
    } finally {
      starting.current -= 1;
    }
  };

  // ---- start: history, then a run still going (reload mid-run) ----------------------------------
  useEffect(() => {
    let stop = false;
    (async () => {
      const rows = await loadLatest();
      if (stop) return;
      let running = null;
      try {
        // A run waiting for the owner's approval is still going: its card must come back after a reload.
        const [list, waiting] = await Promise.all([get(`/api/jarvis/runs${qs({ status: 'running', limit: 5 })}`),
          get(`/api/jarvis/runs${qs({ status: 'awaiting_approval', limit: 5 })}`).catch(() => ({ runs: [] }))]);
        const going = [...(list.runs || []), ...(waiting.runs || [])].sort((a, b) => b.id - a.id);
        running = going.find((r) => r.trigger === 'api') || going[0] || null;
      } catch (err) {
        // No runs list on this server: a run of the thread's last user turn, or of a worker still
        // going, may be running.
        const candidates = [];
        const last = [...rows].reverse().find((m) => m.run_id);
        if (last && last.role === 'user') candidates.push(last.run_id);
        try {
          const ws = await get(`/api/jarvis/workers${qs({ limit: 5 })}`);
          for (const w of ws.workers) if (w.status === 'running' || w.status === 'queued') candidates.push(w.run_id);
        } catch { /* no workers to look at */ }
        for (const id of candidates) {
          try {
            const doc = await get(`/api/jarvis/runs/${id}`);
            if (UNFINISHED.has(doc.status)) { running = { id: doc.run_id, task: doc.task }; break; }
          } catch { /* nothing to re-attach */ }
        }
      }
      // A run typed while this was loading is followed already: attaching again would replay its events.
      if (running && !stop && !mine.current.has(running.id)) cancelFlag.current = attach(running.id, running.task);
    })();
    return () => { stop = true; streamRef.current?.close(); };
  }, []);

  useEffect(() => { if (visible) inputRef.current?.focus(); }, [visible]);

  const onKey = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };

  const workers = run ? run.order.map((id) => run.workers[id]) : [];
  const connection = conn === 'reconnecting' || feedConn === 'reconnecting' ? 'Reconnecting…' : 'Live';

  return (
    <main class="chat" id={visible ? 'main-content' : undefined}>
      <h1 class="sr-only">Jarvis</h1>
      <div class="chat-bar">
        <p role="status" aria-label="Connection" class={`conn ${connection === 'Live' ? 'ok' : 'warn'}`}>{connection}</p>
        <Settings />
        <Voice onText={(t) => setText((cur) => (cur ? `${cur} ${t}` : t))} readAloud={readAloud} setReadAloud={setReadAloud} />
        <Push />
      </div>
      <Feed isMine={isMine} onOpen={(r) => attach(r.run_id, r.task)} onState={setFeedConn} />
      <section role="log" aria-label="Conversation" class="log" ref={logRef}>
        {older && <button type="button" class="secondary" onClick={loadOlder}>Load older messages</button>}
        {loadError && <p class="error" role="alert">{loadError}</p>}
        {messages.map((m) => <ShownMessage key={m.key} m={m} />)}
      </section>
      <section role="status" aria-live="polite" aria-label="Workers" class="progress">
        {run && run.active && ((run.approvals || []).some((x) => x.status === 'pending')
          ? <p class="investigating waiting">Waiting for your approval…</p>
          : <p class="investigating">Investigating…{run.thinking ? ` ${run.thinking}` : ''}</p>)}
        {run && !run.active && run.status && run.status !== 'success' && <p>Run {run.runId}: {run.status}</p>}
        {workers.length > 0 && (
          <ul class="workers">{workers.map((w) => <WorkerRow key={w.job_id} w={w} onRetry={retry} />)}</ul>
        )}
      </section>
      {run && run.approvals && run.approvals.length > 0 && (
        <section aria-label="Approvals" class="approvals" data-run-id={run.runId}>
          {run.approvals.map((a) => <ApprovalCard key={a.id} approval={a} onAnswered={answered} />)}
        </section>
      )}
      {run && run.active && <button type="button" class="danger" onClick={cancel} disabled={run.cancelling}>Cancel</button>}
      <form class="composer" onSubmit={(e) => { e.preventDefault(); send(); }}>
        <label for="message-input" class="sr-only">Message Jarvis</label>
        <textarea id="message-input" ref={inputRef} rows={2} placeholder="Ask Jarvis…" value={text}
          onInput={(e) => setText(e.currentTarget.value)} onKeyDown={onKey} maxLength={UTTERANCE_CHARS} aria-describedby="message-counter" />
        <button type="submit" disabled={busy || !text.trim()}>Send</button>
      </form>
      <p id="message-counter" class={`counter${text.length >= UTTERANCE_CHARS ? ' at-limit' : ''}`} aria-live="polite">
        {nearLimit(text.length) ? `${text.length.toLocaleString('en')} / ${UTTERANCE_CHARS.toLocaleString('en')} characters` : ''}
      </p>
    </main>
  );
}
