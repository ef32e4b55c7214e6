// The thread inspector: the owner's supervisor thread as stored, page by page, with metadata.
import { useState } from 'preact/hooks';
import { get, qs } from '../api.js';
import { EmptyRow, ErrorLine, Time, useLoad } from './common.jsx';

export function ThreadInspector() {
  const [before, setBefore] = useState(null);
  const [history, setHistory] = useState([]);
  const { data, error } = useLoad(() => get(`/api/jarvis/thread${qs({ limit: 50, before_id: before })}`), [before]);
  return (
    <>
      <h2>Thread</h2>
      <ErrorLine error={error} />
      {data && (
        <>
          <p>Thread {data.thread_id ?? '— (no run yet)'} · {data.messages.length} messages on this page</p>
          <p>
            <button type="button" class="secondary" disabled={!history.length}
              onClick={() => { const h = [...history]; setBefore(h.pop() ?? null); setHistory(h); }}>Newer page</button>{' '}
            <button type="button" class="secondary" disabled={!data.next_before_id}
              onClick={() => { setHistory([...history, before]); setBefore(data.next_before_id); }}>Older page</button>
          </p>
          <table class="grid">
            <caption class="sr-only">Thread messages, oldest first</caption>
            <thead><tr><th>Id</th><th>Role</th><th>Run</th><th>Created</th><th>Content</th><th>Metadata</th></tr></thead>
            <tbody>
              {data.messages.map((m) => (
                <tr key={m.id} data-role={m.role}>
                  <td>{m.id}</td><td>{m.role}</td>
                  <td>{m.run_id ? <a href={`#/dashboard/runs/${m.run_id}`}>run {m.run_id}</a> : ''}</td>
                  <td><Time iso={m.created_at} /></td>
                  <td><details><summary>{(m.content || '').slice(0, 120) || '(empty)'}</summary><pre class="wrap">{m.content}</pre></details></td>
                  <td>{m.metadata && Object.keys(m.metadata).length ? <pre class="wrap small">{JSON.stringify(m.metadata, null, 1)}</pre> : ''}</td>
                </tr>
              ))}
              {data.messages.length === 0 && <EmptyRow cols={6}>No messages yet: the thread starts with your first question in the chat.</EmptyRow>}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
