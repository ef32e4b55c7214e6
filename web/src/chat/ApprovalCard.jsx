// One pending approval as the owner answers it (issue 27 item 3): the exact call, who started the
// run, the model's reason shown as quoted, labelled data (text only: never markdown or HTML), the
// expiry, and Approve / Deny. One answer at a time (a second click while one is in flight does
// nothing); the server's word on a late answer (409: answered already, expired) is shown as it is.
import { Fragment } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ApiError, describe, post } from '../api.js';
import { callRows, isAnswerable, outcomeText, startedBy } from '../approvals.js';
import { when } from '../format.js';

export function ApprovalCard({ approval: a, onAnswered = () => {}, showRun = false }) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState('');
  const inFlight = useRef(false);
  const answerable = isAnswerable(a) && !a.answer;
  const answer = async (decision) => {
    if (inFlight.current) return; // double-submit guard: one answer per card at a time
    inFlight.current = true;
    setBusy(true);
    setProblem('');
    try {
      const r = await post(`/api/jarvis/approvals/${a.id}/${decision}`);
      onAnswered({ ...a, status: r.status, answer: r.message });
    } catch (err) {
      setProblem(describe(err));
      // 409: decided elsewhere (another tab, SMS, email) or expired: the card shows the outcome.
      if (err instanceof ApiError && err.status === 409) {
        const status = /expired/.test(err.message) ? 'expired' : /cancelled|no longer open/.test(err.message) ? 'cancelled'
          : (/\((approved|denied)\)/.exec(err.message) || [])[1] || a.status;
        onAnswered({ ...a, status, answer: err.message });
      }
    } finally {
      inFlight.current = false;
      setBusy(false);
    }
  };
  const reason = a.reason || {};
  const directive = a.kind === 'directive';
  return (
    <section class={`approval st-${a.status}`} data-approval-id={a.id} data-status={a.status}
      aria-label={`Approval ${a.id}: ${a.call?.tool || 'a call'}`}>
      <h3>{a.status !== 'pending' ? 'Approval' : directive ? 'Approve this change?' : 'Approve this call?'}{' '}
        <span class="badge">{a.status}</span></h3>
      <dl class="facts">
        {directive
          ? <><dt>Change</dt><dd>{a.summary}</dd></>
          : callRows(a.call).map(([k, v]) => <Fragment key={k}><dt>{k}</dt><dd><code class="call">{v}</code></dd></Fragment>)}
        {a.asked_because && <><dt>Asked because</dt><dd>{a.asked_because}</dd></>}
        <dt>Started by</dt><dd>{startedBy(a.run?.trigger)}</dd>
        {showRun && a.run && <><dt>Run</dt><dd><a href={`#/dashboard/runs/${a.run.id}`}>run {a.run.id}</a>{a.run.task ? `: ${a.run.task}` : ''}</dd></>}
        {a.status === 'pending' && <><dt>Expires</dt><dd>{when(a.expires_at)}</dd></>}
        {a.code && <><dt>SMS code</dt><dd>Y {a.code} / N {a.code}</dd></>}
        {a.answered_at && <><dt>Answered</dt><dd>{when(a.answered_at)}</dd></>}
      </dl>
      {reason.text && (
        <figure class="untrusted">
          <figcaption>The model's stated reason (untrusted: {reason.note || 'data, not an instruction'})</figcaption>
          <blockquote><pre class="reason">{reason.text}</pre></blockquote>
        </figure>
      )}
      {answerable ? (
        <p class="actions">
          <button type="button" disabled={busy} onClick={() => answer('approve')}>Approve</button>{' '}
          <button type="button" class="danger" disabled={busy} onClick={() => answer('deny')}>Deny</button>
        </p>
      ) : (
        <p class="outcome" role="status">
          {directive && a.outcome ? `Approved: ${a.outcome}`
            : directive && a.answer ? a.answer  // the server's word: what approving it did
              : outcomeText(a.status === 'pending' ? 'expired' : a.status, a.kind)}
        </p>
      )}
      {problem && <p class="error" role="alert">{problem}</p>}
    </section>
  );
}
