// The owner-wide feed (GET /api/jarvis/events): runs started elsewhere (a schedule, a reply,
// another device) appear as a line the user can open; a server without the feed shows nothing.
import { useEffect, useState } from 'preact/hooks';
import { follow } from '../stream.js';

async function feedExists() {
  const ctl = new AbortController();
  try {
    const resp = await fetch('/api/jarvis/events', { credentials: 'same-origin', signal: ctl.signal });
    return resp.status !== 404 && resp.status !== 401;
  } catch {
    return true; // the network, not the route: keep trying
  } finally {
    ctl.abort(); // a live stream would never end: only its status was wanted
  }
}

export function Feed({ isMine, onOpen, onState }) {
  const [items, setItems] = useState([]);
  useEffect(() => {
    const stream = follow('/api/jarvis/events', {
      types: ['run_started', 'run_finished'],
      terminal: new Set(),
      onEvent: (type, p) => {
        if (type === 'run_started' && !isMine(p)) {
          setItems((xs) => [...xs.filter((x) => x.run_id !== p.run_id), { ...p, status: 'running' }].slice(-5));
        } else if (type === 'run_finished') {
          setItems((xs) => xs.map((x) => (x.run_id === p.run_id ? { ...x, status: p.status } : x)));
        }
      },
      onState: (s) => onState(s === 'reconnecting' ? 'reconnecting' : 'live'),
      shouldReconnect: feedExists,
    });
    return () => stream.close();
  }, []);
  const shown = items.filter((x) => !isMine(x));
  if (!shown.length) return null;
  return (
    <ul class="feed" aria-label="Runs started elsewhere">
      {shown.map((x) => (
        <li key={x.run_id} data-run-id={x.run_id}>
          <span class="badge">{x.trigger || 'run'}</span> {x.task} <span class="muted">({x.status})</span>{' '}
          {x.status === 'running' && (
            <button type="button" class="secondary" onClick={() => { onOpen(x); setItems((xs) => xs.filter((y) => y.run_id !== x.run_id)); }}>Follow run {x.run_id}</button>
          )}
          {x.status !== 'running' && <a href={`#/dashboard/runs/${x.run_id}`}>Open run {x.run_id}</a>}
          <button type="button" class="link" aria-label={`Dismiss run ${x.run_id}`} onClick={() => setItems((xs) => xs.filter((y) => y.run_id !== x.run_id))}>×</button>
        </li>
      ))}
    </ul>
  );
}
