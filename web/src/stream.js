// Following a Server-Sent Events stream without losing or repeating an event.
//
// - Every event with an id is delivered once: ids already seen are dropped, so re-attaching to a
//   run from its start (after a reload) or a server replay after Last-Event-ID shows nothing twice.
// - EventSource reconnects by itself (the server hints `retry: 5000`) and sends Last-Event-ID;
//   while it does, the state is "reconnecting". When it gives up (CLOSED: a 204, a 4xx, a dead
//   server), the stream reconnects itself with backoff from 5 s, passing `last_event_id` in the URL,
//   unless `shouldReconnect()` says no (the run ended meanwhile).
// - A terminal event (supervisor_complete, error) closes the stream for good.

export const RUN_EVENTS = [
  'supervisor_started', 'supervisor_thinking', 'worker_spawned', 'worker_started', 'worker_complete',
  'worker_summary_ready', 'memory_changed', 'supervisor_complete', 'error',
  // issue 27: a worker's call waits for the owner's approval (the run is `awaiting_approval`), then is answered
  'approval_requested', 'approval_answered',
  // issue 29: the supervisor's answer as the model writes it ({offset, text, reset?}: chat/answerStream.js)
  'answer_delta',
];
export const TERMINAL = new Set(['supervisor_complete', 'error']);
export const BACKOFF_START_MS = 5000;
export const BACKOFF_MAX_MS = 60000;

export function backoffDelay(attempt) {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** Math.max(0, attempt));
}

export function withLastEventId(url, lastId) {
  if (!lastId) return url;
  const sep = url.includes('?') ? '&' : '?';
  return `${url.replace(/([?&])last_event_id=[^&]*&?/, '$1').replace(/[?&]$/, '')}${sep}last_event_id=${lastId}`;
}

/**
 * Follow `url`. `onEvent(type, payload, id)` once per event id; `onState("live"|"reconnecting"|"closed")`.
 * Returns {close(), lastId()}.
 */
export function follow(url, { types = RUN_EVENTS, terminal = TERMINAL, onEvent, onState = () => {},
  shouldReconnect = async () => true, EventSourceImpl = globalThis.EventSource,
  setTimer = (fn, ms) => setTimeout(fn, ms), clearTimer = (t) => clearTimeout(t), seen = new Set() } = {}) {
  let source = null;
  let timer = null;
  let attempt = 0;
  let lastId = 0;
  let closed = false;

  const state = (s) => { if (!closed || s === 'closed') onState(s); };

  const finish = () => {
    closed = true;
    if (timer) clearTimer(timer);
    if (source) source.close();
    source = null;
    onState('closed');
  };

  const handle = (type) => (e) => {
    if (typeof e.data !== 'string') return; // EventSource's own 'error' (a drop) is no server 'error' event
    const id = e.lastEventId ? Number(e.lastEventId) : 0;
    if (id) {
      if (seen.has(id)) return;
      seen.add(id);
      if (id > lastId) lastId = id;
    }
    let payload = {};
    try {
      payload = e.data ? JSON.parse(e.data) : {};
    } catch {
      payload = { raw: e.data };
    }
    attempt = 0;
    onEvent(type, payload, id);
    if (terminal.has(type)) finish();
  };

  const open = () => {
    if (closed) return;
    source = new EventSourceImpl(withLastEventId(url, lastId), { withCredentials: true });
    source.onopen = () => { attempt = 0; state('live'); };
    source.onerror = () => {
      if (closed) return;
      if (source && source.readyState === 2) { // CLOSED: EventSource gave up; we take over
        source.close();
        source = null;
        state('reconnecting');
        const delay = backoffDelay(attempt++);
        timer = setTimer(async () => {
          timer = null;
          let again = true;
          try {
            again = await shouldReconnect();
          } catch {
            again = true;
          }
          if (again) open(); else finish();
        }, delay);
      } else {
        state('reconnecting'); // CONNECTING: the browser retries after the server's retry: hint
      }
    };
    for (const t of types) source.addEventListener(t, handle(t));
  };

  open();
  return { close: finish, lastId: () => lastId };
}
