// The task inbox: what waits for the owner's approval first (answerable here), then background
// results with their severity, acknowledged one by one.
import { useEffect, useState } from 'preact/hooks';
import { describe, get, post } from '../api.js';
import { ApprovalCard } from './ApprovalCard.jsx';
import { when } from '../format.js';
import { renderMarkdown } from '../markdown.js';

export function Inbox() {
  const [items, setItems] = useState(null);
  const [approvals, setApprovals] = useState([]);
  const [error, setError] = useState('');
  const load = () => get('/api/jarvis/inbox?limit=100')
    .then((d) => { setItems(d.items); setApprovals(d.approvals || []); setError(''); })
    .catch((err) => setError(describe(err)));
  const answered = (a) => setApprovals((xs) => xs.map((x) => (x.id === a.id ? a : x)));
  useEffect(() => { load(); }, []);
  const ack = async (runId) => {
    try {
      const item = await post(`/api/jarvis/inbox/${runId}/ack`);
      setItems((xs) => xs.map((x) => (x.run_id === runId ? item : x)));
    } catch (err) {
      setError(describe(err));
    }
  };
  return (
    <main class="page" id="main-content">
      <h1>Inbox</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {approvals.length > 0 && (
        <section aria-label="Waiting for your approval">
          <h2>Waiting for your approval</h2>
          {approvals.map((a) => <ApprovalCard key={a.id} approval={a} onAnswered={answered} showRun />)}
        </section>
      )}
      {items && items.length === 0 && approvals.length === 0 && <p>Nothing in the inbox.</p>}
      <ul class="inbox">
        {(items || []).map((x) => (
          <li key={x.run_id} data-run-id={x.run_id} data-severity={x.severity} class={x.acknowledged_at ? 'acked' : ''}>
            <span class={`badge sev-${x.severity}`}>{x.severity}</span> <strong>{x.headline}</strong>
            <span class="muted"> {x.schedule_name ? `· ${x.schedule_name} ` : ''}· {when(x.created_at)}</span>
            <div class="md" dangerouslySetInnerHTML={{ __html: renderMarkdown(x.details) }} />
            <a href={`#/dashboard/runs/${x.run_id}`}>Run {x.run_id}</a>{' '}
            {x.acknowledged_at
              ? <span class="muted">acknowledged {when(x.acknowledged_at)}</span>
              : <button type="button" onClick={() => ack(x.run_id)}>Acknowledge</button>}
          </li>
        ))}
      </ul>
    </main>
  );
}
