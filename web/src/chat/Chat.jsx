// The Jarvis client: the owner's one thread, every utterance routed (quick or supervisor), a run's
// progress inside its own turn (Turn.jsx), the answer as safe markdown with its evidence, reload recovery.
// One scroll container (the page), the composer pinned to the bottom, one settings menu.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get, isMissingRoute, post, qs } from '../api.js';
import { cardsForRun } from '../approvals.js';
import { UTTERANCE_CHARS, measure } from '../limits.js';
import { memo } from '../memo.js';
import { follow } from '../stream.js';
import { Answer } from './Answer.jsx';
import { withDelta, withFinalAnswer, withoutDraft } from './answerStream.js';
import { ApprovalCard } from './ApprovalCard.jsx';
import { runEnding, sentence } from './errors.js';
import { Feed } from './Feed.jsx';
import { logPages, samePage } from './logPages.js';
import { Menu } from './Menu.jsx';
import { Push } from './Push.jsx';
import { Settings, loadPreferences } from './Settings.jsx';
import { Sources } from './Sources.jsx';
import { Steps } from './Turn.jsx';
import { Voice, speak } from './Voice.jsx';

const PAGE = 30;
const CONTEXT_TURNS = 6;
const EXAMPLES = [
  'Check disk usage and memory on my servers',
  'Which of my scheduled checks failed this week?',
  'What do you remember about my servers?',
  'What time is it?',
];
let keySeq = 0;
const nextKey = () => `local-${++keySeq}`;
// A run the page follows: still going (waiting for the owner's approval is going, not stalled).
const UNFINISHED = new Set(['queued', 'running', 'awaiting_approval']);
// An error worth retrying as it is (the network, the server); a refused input needs editing instead.
const retryable = (err) => !(err instanceof ApiError) || err.status === 0 || err.status === 429 || err.status >= 500;

/** A thread row (GET /api/jarvis/thread) as the page shows it. */
function fromThread(m) {
  const meta = m.metadata || {};
  const quick = meta.mode === 'quick' || meta.quick === true || meta.kind === 'quick';
  return { key: `m-${m.id}`, id: m.id, role: m.role, content: m.content || '', runId: m.run_id || null,
    mode: quick ? 'quick' : null, jobIds: Array.isArray(meta.job_ids) ? meta.job_ids : [] };
}

/** A fresh run as the page follows it. */
const newRun = (runId, task) => ({ runId, task, status: 'running', active: true, workers: {}, order: [], thinking: '',
  approvals: [], startedAt: Date.now(), loaded: true });

/** The run document's word on a run (its workers, timings, cost) merged into what the page has. */
function mergeDoc(r, doc) {
  const workers = { ...(r?.workers || {}) };
  const order = [...(r?.order || [])];
  for (const w of doc.workers || []) {
    const had = workers[w.job_id] || {};
    workers[w.job_id] = { ...had, ...w, summary: w.summary || had.summary };
    if (!order.includes(w.job_id)) order.push(w.job_id);
  }
  const started = doc.started_at ? Date.parse(doc.started_at) : null;
  const active = UNFINISHED.has(doc.status) && (r ? r.active : true);
  return { ...(r || newRun(doc.run_id, doc.task)), task: r?.task || doc.task, workers, order, loaded: true,
    startedAt: started || r?.startedAt, durationMs: doc.duration_ms ?? r?.durationMs, costUsd: doc.cost_usd ?? r?.costUsd,
    status: active ? (r?.status || doc.status) : doc.status, active, error: doc.error || r?.error,
    budgetStopped: doc.budget_stopped };
}

/** The answer's body, the one place an answer's text and its evidence render: the text (a draft while
 * it streams, Answer.jsx) and, once whole, its numbered sources (Sources.jsx). */
function AnswerBody({ m }) {
  return (
    <div class="answer" data-run-id={m.runId || undefined}>
      <Answer text={m.content} streaming={m.streaming} />
      {!m.streaming && m.jobIds && m.jobIds.length > 0 && <Sources runId={m.runId} jobIds={m.jobIds} />}
    </div>
  );
}

function Message({ m, run, onRetryWorker, onAnswered, onRunAgain }) {
  if (m.role === 'notice') return <p class="notice">{m.content}</p>;
  if (m.role === 'error') {
    return (
      <p class="notice error" role="alert">{m.content}
        {m.retry && <>{' '}<button type="button" class="secondary" onClick={m.retry}>Retry</button></>}
      </p>
    );
  }
  const assistant = m.role === 'assistant';
  if (!assistant) {
    return <article data-role="user" class="msg msg-user" aria-label="You"><p class="plain">{m.content}</p></article>;
  }
  // A run's turn: its steps, its approvals, its answer, and how it ended when it did not answer.
  const ended = run && !run.active && run.status && run.status !== 'success' && !run.budgetStopped;
  return (
    <article data-role="assistant" data-mode={m.mode || undefined} data-run-id={m.runId || undefined}
      data-status={run ? run.status : undefined} class={`msg msg-assistant${m.runId ? ' turn' : ''}`}
      aria-label={m.mode === 'quick' ? 'Jarvis (quick answer)' : 'Jarvis'}>
      {run && <Steps run={run} onRetry={onRetryWorker} />}
      {run && run.approvals && run.approvals.length > 0 && (
        <section aria-label="Approvals" class="approvals" data-run-id={run.runId}>
          {run.approvals.map((a) => <ApprovalCard key={a.id} approval={a} onAnswered={onAnswered} />)}
        </section>
      )}
      {m.content && <AnswerBody m={m} />}
      {ended && (
        <p class="notice error ending" role="alert">{runEnding(run.status, run.error)}{' '}
          {run.task && <button type="button" class="secondary" onClick={() => onRunAgain(run.task)}>Run again</button>}
        </p>
      )}
    </article>
  );
}

// A long thread: a message renders again only when it (or its run) changed, not on every keystroke.
const ShownMessage = memo(Message);

// A page of the log (logPages.js): drawn again only when one of its messages or their runs changed.
function MessagePage({ items, runs, acts }) {
  return <div class="log-page">{items.map((m, i) => <ShownMessage key={m.key} m={m} run={runs[i]} {...acts} />)}</div>;
}
const ShownPage = memo(MessagePage, samePage);

function Empty({ name, onPick }) {
  const hour = new Date().getHours();
  const part = hour < 12 ? 'Good morning' : hour < 18 ? 'Good afternoon' : 'Good evening';
  return (
    <div class="empty">
      <p class="greeting">{part}{name ? `, ${name}` : ''}.</p>
      <p class="muted">Ask a question, or give Jarvis a task to check on your servers. For example:</p>
      <ul class="examples" aria-label="Example tasks">
        {EXAMPLES.map((x) => <li key={x}><button type="button" class="example" onClick={() => onPick(x)}>{x}</button></li>)}
      </ul>
    </div>
  );
}

export function Chat({ visible, owner }) {
  const [messages, setMessages] = useState([]);
  const [runs, setRuns] = useState({}); // run id -> the run as its turn shows it
  const [older, setOlder] = useState(null); // next_before_id
  const [loaded, setLoaded] = useState(false);
  const [loadError, setLoadError] = useState('');
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [activeId, setActiveId] = useState(null); // the run whose stream the page follows
  const [conn, setConn] = useState('live');
  const [feedConn, setFeedConn] = useState('live');
  const [readAloud, setReadAloud] = useState(false);
  const streams = useRef(new Map()); // run id -> its event stream: every unfinished run of the page is followed
  const cancelFlags = useRef(new Map()); // run id -> marks it cancelled by the owner (no quick fallback)
  const mine = useRef(new Set()); // runs this page started or follows (the feed does not announce them)
  const starting = useRef(0); // POSTs that start a run, in flight: their run_started may come first
  const isMine = (p) => mine.current.has(p.run_id) || (starting.current > 0 && p.trigger === 'api');
  const inputRef = useRef(null);
  const composerRef = useRef(null);
  const readRef = useRef(readAloud);
  readRef.current = readAloud;
  const visibleRef = useRef(visible);
  visibleRef.current = visible;
  const runsRef = useRef(runs);
  runsRef.current = runs;
  // The run Cancel and Escape act on: the latest one the page follows that still goes.
  const run = (activeId && runs[activeId]?.active ? runs[activeId] : null)
    || Object.values(runs).filter((r) => r.active).sort((a, b) => b.runId - a.runId)[0] || null;

  // ---- scrolling: the page is the one scroll container --------------------------------------------
  const scrollToEnd = () => requestAnimationFrame(() => {
    if (visibleRef.current) window.scrollTo(0, document.documentElement.scrollHeight);
  });
  // A new answer: to its end when it fits on screen, else its start stays in view (no jump to the
  // end of a long answer).
  const showAnswer = (runId) => requestAnimationFrame(() => {
    const el = document.querySelector(`.answer[data-run-id="${runId}"]`);
    if (!el || !visibleRef.current) return;
    const room = window.innerHeight - (composerRef.current?.offsetHeight || 0) - 60;
    if (el.getBoundingClientRect().height > room) el.scrollIntoView({ block: 'start' });
    else window.scrollTo(0, document.documentElement.scrollHeight);
  });
  const append = (...items) => { setMessages((ms) => [...ms, ...items]); scrollToEnd(); };
  const updateRun = (runId, fn) => setRuns((rs) => (rs[runId] ? { ...rs, [runId]: fn(rs[runId]) } : rs));
  // A run's answer into its turn, replacing its streamed draft (the turn's first whole answer wins: a
  // replay after a reload, or the thread's stored copy, never shows it twice).
  const setAnswer = (runId, content, jobIds) => setMessages((ms) => withFinalAnswer(ms,
    { key: `run-${runId}`, role: 'assistant', runId, content, jobIds: jobIds || [] }));

  // ---- history ---------------------------------------------------------------------------------
  // Past turns keep their steps: each answer's run document, newest first, two at a time.
  const loadPastRuns = async (rows) => {
    const ids = [...new Set(rows.filter((r) => r.role === 'assistant' && r.runId).map((r) => r.runId))].reverse()
      .filter((id) => !runsRef.current[id]);
    const next = async () => {
      const id = ids.shift();
      if (id == null) return;
      try {
        const doc = await get(`/api/jarvis/runs/${id}`);
        setRuns((rs) => (rs[id] ? rs : { ...rs, [id]: { ...mergeDoc(null, doc), active: false } }));
      } catch { /* a run gone (retention) or a blip: its turn shows the answer alone */ }
      await next();
    };
    await Promise.all([next(), next()]);
  };
  const loadLatest = async () => {
    try {
      const page = await get(`/api/jarvis/thread${qs({ limit: PAGE })}`);
      const rows = page.messages.filter((m) => m.role === 'user' || m.role === 'assistant').map(fromThread);
      // Turns typed while the page was loading are kept after the stored ones, answered or not: a
      // quick answer that came back before this page of the thread is not lost, nor shown twice.
      const stored = new Set(rows.map((r) => r.id));
      setMessages((ms) => [...rows, ...ms.filter((m) => !(m.id && stored.has(m.id)) && !rows.some((r) => r.key === m.key)
        && !(m.runId && rows.some((r) => r.runId === m.runId && r.role === m.role)))]);
      setOlder(page.next_before_id);
      setLoadError('');
      scrollToEnd();
      loadPastRuns(rows);
      return page.messages;
    } catch (err) {
      setLoadError(`The conversation could not be loaded. ${sentence(err)}`);
      return [];
    } finally {
      setLoaded(true);
    }
  };
  const loadOlder = async () => {
    try {
      const page = await get(`/api/jarvis/thread${qs({ limit: PAGE, before_id: older })}`);
      const rows = page.messages.filter((m) => m.role === 'user' || m.role === 'assistant')
        .map((m) => ({ ...fromThread(m), page: older }));
      setMessages((ms) => {
        const had = new Set(ms.map((m) => m.id));
        return [...rows.filter((r) => !had.has(r.id)), ...ms];
      });
      setOlder(page.next_before_id);
      loadPastRuns(rows);
    } catch (err) {
      setLoadError(`Older messages could not be loaded. ${sentence(err)}`);
    }
  };

  // ---- a run's stream --------------------------------------------------------------------------
  const finishRun = (runId, status, extra = {}) => updateRun(runId, (r) => ({ ...r, status, active: false, ...extra }));
  const syncDoc = (doc) => updateRun(doc.run_id, (r) => mergeDoc(r, doc));

  // The run's approvals as cards, from the owner's list (live on the run's approval events, and after
  // a reload): pending ones to answer, answered ones with their outcome.
  const loadApprovals = async (runId) => {
    try {
      const list = await get('/api/jarvis/approvals');
      updateRun(runId, (r) => ({ ...r, approvals: cardsForRun(list.approvals, runId, r.approvals) }));
    } catch { /* no approvals API on this server, or a blip: the next event loads them again */ }
  };
  const answered = (a) => setRuns((rs) => {
    const id = Object.keys(rs).find((k) => (rs[k].approvals || []).some((x) => x.id === a.id));
    return id ? { ...rs, [id]: { ...rs[id], approvals: rs[id].approvals.map((x) => (x.id === a.id ? a : x)) } } : rs;
  });

  const fallbackToQuick = async (runId, task) => {
    try {
      const q = await post('/api/jarvis/quick', { utterance: task, failed_run_id: runId });
      append({ key: nextKey(), role: 'assistant', content: q.answer, mode: 'quick', id: q.message_ids?.[1] });
      if (readRef.current) speak(q.answer);
    } catch (err) {
      if (!isMissingRoute(err)) append({ key: nextKey(), role: 'error', content: `No quick answer either. ${sentence(err)}` });
    }
  };

  // Show the run's turn: its question (after a reload, from the run: the thread stores it at the end)
  // and the assistant turn its steps and answer go into.
  const ensureTurn = (runId, task, question) => setMessages((ms) => {
    if (ms.some((m) => m.role === 'assistant' && m.runId === runId)) return ms;
    let out = ms;
    // Found by the start-up check while this page's own POST was in flight: the question typed here is it.
    const typed = !question && task ? [...out].reverse().find((m) => m.role === 'user' && !m.runId && !m.id
      && m.content.trim() === task.trim()) : null;
    const claim = question || typed?.key;
    if (claim) out = out.map((m) => (m.key === claim ? { ...m, runId } : m));
    else if (task && !out.some((m) => m.role === 'user' && m.runId === runId)) {
      out = [...out, { key: `q-${runId}`, role: 'user', runId, content: task }];
    }
    return [...out, { key: `run-${runId}`, role: 'assistant', runId, content: '', jobIds: [] }];
  });

  const attach = (runId, task, question = null) => {
    streams.current.get(runId)?.close(); // re-attached (a reload, the feed): from its first event again
    mine.current.add(runId);
    setRuns((rs) => ({ ...rs, [runId]: rs[runId] ? { ...rs[runId], active: true } : newRun(runId, task) }));
    ensureTurn(runId, task, question);
    setActiveId(runId);
    scrollToEnd();
    loadApprovals(runId);
    if (!question) get(`/api/jarvis/runs/${runId}`).then(syncDoc).catch(() => {}); // a reload: its start time
    let cancelled = false;
    const order = []; // job ids in spawn order: the answer's evidence while the run document loads
    const url = `/api/jarvis/supervisor/events${qs({ run_id: runId })}`;
    const closeWith = (doc) => {
      syncDoc(doc);
      if (doc.budget_stopped) setAnswer(runId, doc.result || '', []); // its partial answer, never a quick model call
      else if (doc.status === 'timeout' && doc.result) setAnswer(runId, doc.result, (doc.workers || []).map((w) => w.job_id));
      if (!cancelled && doc.status === 'failed' && !doc.budget_stopped) fallbackToQuick(runId, task || doc.task);
    };
    const onEvent = (type, p) => {
      if (type === 'supervisor_thinking') updateRun(runId, (r) => ({ ...r, thinking: p.message || '' }));
      else if (type === 'answer_delta') setMessages((ms) => withDelta(ms, runId, p)); // the answer as it is written
      else if (type === 'approval_requested') {
        updateRun(runId, (r) => ({ ...r, status: 'awaiting_approval' }));
        loadApprovals(runId);
      } else if (type === 'approval_answered') {
        updateRun(runId, (r) => ({ ...r, status: r.status === 'awaiting_approval' ? 'running' : r.status,
          approvals: (r.approvals || []).map((a) => (a.id === p.approval_id && a.status === 'pending' ? { ...a, status: p.status } : a)) }));
        loadApprovals(runId);
      } else if (type.startsWith('worker_') && p.job_id != null) {
        if (!order.includes(p.job_id)) order.push(p.job_id);
        updateRun(runId, (r) => {
          const prev = r.workers[p.job_id] || { job_id: p.job_id, status: 'spawned', task: '', seenAt: Date.now() };
          const next = { ...prev };
          if (type === 'worker_spawned') { next.task = p.task || prev.task; next.status = prev.status || 'spawned'; }
          if (type === 'worker_started') next.status = prev.status === 'spawned' ? 'running' : prev.status;
          if (type === 'worker_complete') { next.status = p.status || 'success'; next.duration_ms = p.duration_ms; next.error = p.error; }
          if (type === 'worker_summary_ready') next.summary = p.summary;
          const ids = r.order.includes(p.job_id) ? r.order : [...r.order, p.job_id];
          return { ...r, workers: { ...r.workers, [p.job_id]: next }, order: ids };
        });
      } else if (type === 'supervisor_complete') {
        finishRun(runId, 'success', { durationMs: Date.now() - (runsRef.current[runId]?.startedAt || Date.now()) });
        loadApprovals(runId); // their last word (e.g. expired) if the page missed it
        // Re-attached after the answer was stored (a reload): the thread shows it already.
        setAnswer(runId, p.result || '', [...order]);
        showAnswer(runId);
        if (readRef.current) speak(p.result || '');
        // The run document: the evidence as stored, the run's own duration and cost.
        get(`/api/jarvis/runs/${runId}`).then((doc) => {
          syncDoc(doc);
          const ids = (doc.workers || []).map((w) => w.job_id);
          if (ids.length) setMessages((ms) => ms.map((m) => (m.role === 'assistant' && m.runId === runId ? { ...m, jobIds: ids } : m)));
        }).catch(() => {});
      } else if (type === 'error') {
        finishRun(runId, p.status || 'failed', { error: p.message || '' });
        setMessages((ms) => withoutDraft(ms, runId)); // half an answer is no answer
        loadApprovals(runId); // a cancel or failure while waiting: the cards say cancelled
        if (p.result) { setAnswer(runId, p.result, (p.partial || []).map((w) => w.job_id)); showAnswer(runId); }
        get(`/api/jarvis/runs/${runId}`).then(closeWith).catch(() => { if (!cancelled) fallbackToQuick(runId, task); });
      }
    };
    const stream = follow(url, {
      onEvent,
      onState: (s) => {
        if (s === 'closed') streams.current.delete(runId); // ended (or given up on): no link to lose any more
        setConn(s === 'reconnecting' ? 'reconnecting' : 'live');
      },
      shouldReconnect: async () => {
        try {
          const doc = await get(`/api/jarvis/runs/${runId}`);
          if (UNFINISHED.has(doc.status)) return true;
          finishRun(runId, doc.status);
          closeWith(doc);
          return false;
        } catch (err) {
          return !(err instanceof ApiError && (err.status === 404 || err.status === 401));
        }
      },
    });
    streams.current.set(runId, stream);
    cancelFlags.current.set(runId, () => { cancelled = true; }); // Cancel marks this run, not the last attached
  };
  const acts = useRef({});
  const [turnActs] = useState(() => ({
    onRetryWorker: (jobId) => acts.current.retryWorker(jobId),
    onAnswered: (a) => acts.current.answered(a),
    onRunAgain: (task) => acts.current.runAgain(task),
  }));

  const startSupervisor = async (task, visibleMessages, question) => {
    const prefs = loadPreferences();
    const previous = visibleMessages.filter((m) => (m.role === 'user' || m.role === 'assistant') && m.content)
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
    attach(accepted.run_id, task, question);
  };

  /** Send `utterance`: routed (quick or supervisor) unless `mode` says which. */
  const send = async (utterance = text.trim(), mode = null) => {
    if (!utterance || busy || measure(utterance).over) return;
    setBusy(true);
    setText((t) => (t.trim() === utterance ? '' : t));
    const before = messages;
    const asked = nextKey();
    append({ key: asked, role: 'user', content: utterance });
    try {
      let where = mode || 'supervisor';
      if (!mode && !(run && run.active)) { // a follow-up on a running task stays with the supervisor
        const history = before.filter((m) => (m.role === 'user' || m.role === 'assistant') && m.content)
          .slice(-CONTEXT_TURNS).map((m) => ({ role: m.role, content: m.content.slice(0, 2000) }));
        try {
          where = (await post('/api/jarvis/route', { utterance, history })).mode;
        } catch (err) {
          if (!isMissingRoute(err)) throw err;
        }
      }
      if (where === 'quick') {
        try {
          const q = await post('/api/jarvis/quick', { utterance });
          setMessages((ms) => ms.map((m) => (m.key === asked ? { ...m, id: q.message_ids?.[0] } : m)));
          append({ key: nextKey(), role: 'assistant', content: q.answer, mode: 'quick', id: q.message_ids?.[1] });
          if (readRef.current) speak(q.answer);
          return;
        } catch (err) {
          // The quick model says it needs tools (409 needs_supervisor, nothing stored): a run takes it.
          if (!isMissingRoute(err) && !(err instanceof ApiError && err.error === 'needs_supervisor')) throw err;
        }
      }
      await startSupervisor(utterance, before, asked);
    } catch (err) {
      const failed = nextKey();
      // Retry sends it once more: the failed question and its error make way for the new attempt.
      const again = retryable(err) ? () => { setMessages((ms) => ms.filter((m) => m.key !== failed && m.key !== asked)); send(utterance, mode); } : null;
      append({ key: failed, role: 'error', content: sentence(err), retry: again });
      setText((t) => t || utterance); // nothing lost: the text comes back to the input
    } finally {
      setBusy(false);
      if (visibleRef.current) inputRef.current?.focus();
    }
  };

  const cancel = async () => {
    if (!run || !run.active) return;
    const runId = run.runId;
    cancelFlags.current.get(runId)?.();
    updateRun(runId, (r) => ({ ...r, cancelling: true }));
    try {
      // The stream goes on: the workers' last events and the run's final error event follow.
      await post(`/api/jarvis/runs/${runId}/cancel`);
    } catch (err) {
      updateRun(runId, (r) => ({ ...r, cancelling: false }));
      append({ key: nextKey(), role: 'error', content: `The run could not be cancelled. ${sentence(err)}` });
    }
  };

  const retryWorker = async (jobId) => {
    const task = Object.values(runsRef.current).map((r) => r.workers[jobId]).find(Boolean)?.task || '';
    starting.current += 1;
    try {
      const accepted = await post(`/api/jarvis/workers/${jobId}/retry`);
      mine.current.add(accepted.run_id);
      append({ key: nextKey(), role: 'notice', content: `Trying again: ${task || `job ${jobId}`}` });
      attach(accepted.run_id, task, nextKey());
    } catch (err) {
      append({ key: nextKey(), role: 'error', content: `The worker could not be retried. ${sentence(err)}` });
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
      if (running && !stop && !mine.current.has(running.id)) attach(running.id, running.task);
    })();
    return () => { stop = true; streams.current.forEach((x) => x.close()); };
  }, []);

  useEffect(() => { if (visible) inputRef.current?.focus(); }, [visible]);

  // Keyboard: "/" focuses the composer; Escape cancels the running run after a confirmation (an open
  // menu takes Escape first: Menu.jsx).
  const cancelRef = useRef(cancel);
  cancelRef.current = cancel;
  const activeRef = useRef(false);
  activeRef.current = !!(run && run.active && !run.cancelling);
  useEffect(() => {
    if (!visible) return undefined;
    const onKey = (e) => {
      if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target;
      const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
      if (e.key === '/' && !typing) {
        e.preventDefault();
        inputRef.current?.focus();
      } else if (e.key === 'Escape' && activeRef.current) {
        e.preventDefault();
        if (window.confirm('Cancel the running task? Its workers stop and no answer follows.')) cancelRef.current();
      }
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [visible]);

  const onKey = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };

  const connection = conn === 'reconnecting' || feedConn === 'reconnecting' ? 'Reconnecting…' : 'Live';
  const limit = measure(text);
  const runAgain = (task) => send(task, 'supervisor');
  // The turns' callbacks, the same functions on every render, so an unchanged turn is not drawn again.
  acts.current = { retryWorker, answered, runAgain };
  const pick = (x) => { setText(x); inputRef.current?.focus(); };

  return (
    <main class="chat" id={visible ? 'main-content' : undefined}>
      <h1 class="sr-only">Jarvis</h1>
      <div class="chat-bar">
        <p role="status" aria-label="Connection" class={`conn ${connection === 'Live' ? 'ok' : 'warn'}`}>{connection}</p>
        {owner && <p class="who">Signed in as <strong>{owner}</strong></p>}
        <Menu label="Settings">
          <Settings />
          <Voice onText={(t) => setText((cur) => (cur ? `${cur} ${t}` : t))} readAloud={readAloud} setReadAloud={setReadAloud} />
          <Push />
        </Menu>
      </div>
      <Feed isMine={isMine} onOpen={(r) => attach(r.run_id, r.task)} onState={setFeedConn} />
      <section role="log" aria-label="Conversation" class="log">
        {older && <button type="button" class="secondary" onClick={loadOlder}>Load older messages</button>}
        {loadError && <p class="notice error" role="alert">{loadError} <button type="button" class="secondary" onClick={loadLatest}>Retry</button></p>}
        {loaded && !loadError && messages.length === 0 && <Empty name={owner} onPick={pick} />}
        {logPages(messages, PAGE).map(({ key, items }) => (
          <ShownPage key={key} items={items} acts={turnActs}
            runs={items.map((m) => (m.role === 'assistant' && m.runId ? runs[m.runId] : null))} />
        ))}
        {busy && <p class="pending" role="status"><span class="spinner" aria-hidden="true" /> Reading your question…</p>}
      </section>
      <form class="composer" ref={composerRef} onSubmit={(e) => { e.preventDefault(); send(); }}>
        <label for="message-input" class="sr-only">Message Jarvis</label>
        <textarea id="message-input" ref={inputRef} rows={2} placeholder="Ask Jarvis… (press / to type)" value={text}
          onInput={(e) => setText(e.currentTarget.value)} onKeyDown={onKey} maxLength={UTTERANCE_CHARS}
          aria-describedby="message-counter" aria-invalid={limit.over || undefined} />
        <div class="composer-actions">
          {run && run.active && <button type="button" class="danger" onClick={cancel} disabled={run.cancelling}>Cancel</button>}
          <button type="submit" disabled={busy || !text.trim() || limit.over}>Send</button>
        </div>
        <p id="message-counter" class={`counter${limit.atLimit ? ' at-limit' : ''}`} aria-live="polite">{limit.line}</p>
      </form>
    </main>
  );
}
