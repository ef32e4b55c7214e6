// Approvals (issue 27): the owner's pending approvals (answerable here, as in the chat's card) and
// the recent answered ones; and the owner's approval policy (per tool allow/ask/deny, the ssh
// allowlist per host, the built-in read-only allowlist, how long an approval waits).
import { useEffect, useState } from 'preact/hooks';
import { del, get, put } from '../api.js';
import { TOOL_MODES, callRows, parseSshAllow, sshAllowText, startedBy } from '../approvals.js';
import { ApprovalCard } from '../chat/ApprovalCard.jsx';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

function ApprovalList() {
  const list = useLoad(() => get('/api/jarvis/approvals'));
  const [answered, setAnswered] = useState({}); // id -> the card's own outcome until the list reloads
  const all = list.data ? list.data.approvals.map((a) => answered[a.id] || a) : [];
  const pending = all.filter((a) => a.status === 'pending' || answered[a.id]);
  const past = all.filter((a) => a.status !== 'pending' && !answered[a.id]);
  return (
    <>
      <h2>Approvals</h2>
      <ErrorLine error={list.error} />
      <p><button type="button" class="secondary" onClick={() => { setAnswered({}); list.reload(); }}>Refresh</button></p>
      <section aria-label="Pending approvals" class="approvals">
        <h3>Pending</h3>
        {list.data && pending.length === 0 && <p>Nothing waits for your approval.</p>}
        {pending.map((a) => (
          <ApprovalCard key={a.id} approval={a} showRun onAnswered={(x) => setAnswered((m) => ({ ...m, [x.id]: x }))} />
        ))}
      </section>
      <h3>Recently answered</h3>
      <table class="grid" aria-label="Answered approvals">
        <thead><tr><th>Approval</th><th>Status</th><th>Call</th><th>Run</th><th>Started by</th><th>Answered</th></tr></thead>
        <tbody>{past.map((a) => (
          <tr key={a.id} data-approval-id={a.id} data-status={a.status}>
            <td>{a.id}</td><td><span class={`badge st-${a.status}`}>{a.status}</span></td>
            <td>{callRows(a.call).map(([k, v]) => <div key={k}><span class="muted">{k}:</span> <code class="call">{v}</code></div>)}</td>
            <td><a href={`#/dashboard/runs/${a.run.id}`}>run {a.run.id}</a></td><td>{startedBy(a.run.trigger)}</td>
            <td><Time iso={a.answered_at} /></td>
          </tr>
        ))}
        {list.data && past.length === 0 && <EmptyRow cols={6}>No answered approvals yet.</EmptyRow>}
        </tbody>
      </table>
    </>
  );
}

function toForm(view) {
  return { tools: { ...view.tools }, ssh: sshAllowText(view.ssh_allow), builtin: view.builtin_allowlist,
    expiry: String(view.expiry_s) };
}

function PolicyEditor() {
  const loaded = useLoad(() => get('/api/jarvis/approvals/policy'));
  const [form, setForm] = useState(null);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  useEffect(() => { if (loaded.data) setForm(toForm(loaded.data)); }, [loaded.data]);
  if (!form) return <><h2>Approval policy</h2><ErrorLine error={loaded.error} /></>;
  const view = loaded.data;
  const done = (v, what) => { if (v) { loaded.setData(v); setForm(toForm(v)); setSaved(what); } };
  const save = async (e) => {
    e.preventDefault();
    setSaved('');
    const ssh = parseSshAllow(form.ssh);
    if (ssh.error) { setError(ssh.error); return; }
    const body = { tools: form.tools, ssh_allow: ssh.value, builtin_allowlist: form.builtin, expiry_s: Number(form.expiry) };
    done(await attempt(setError, () => put('/api/jarvis/approvals/policy', body)), 'Policy saved');
  };
  const reset = async () => { setSaved(''); done(await attempt(setError, () => del('/api/jarvis/approvals/policy')), 'Back to the defaults'); };
  return (
    <>
      <h2>Approval policy</h2>
      <p class="muted">allow: runs; ask: waits for your approval; deny: never runs. Runs started by a schedule or a
        reply ask before anything outside the allowlists, whatever a tool is set to (the sandboxed and directive
        tools excepted). {view.customised ? <>Last changed <Time iso={view.updated_at} />.</> : 'These are the defaults.'}</p>
      <form class="stack" onSubmit={save} aria-label="Approval policy">
        <fieldset>
          <legend>Tools</legend>
          <table class="grid"><tbody>{Object.keys(form.tools).map((tool) => (
            <tr key={tool}><td><label for={`mode-${tool}`}>{tool}</label></td><td>
              <select id={`mode-${tool}`} value={form.tools[tool]}
                onChange={(e) => setForm({ ...form, tools: { ...form.tools, [tool]: e.currentTarget.value } })}>
                {TOOL_MODES.map((m) => <option key={m} value={m}>{m}</option>)}
              </select></td></tr>
          ))}</tbody></table>
        </fieldset>
        <label>SSH commands that run without asking, one "HOST: PATTERN" per line ("*" for every host; ** at the end
          matches the rest)
          <textarea rows={5} spellcheck={false} value={form.ssh} placeholder="web1: systemctl restart nginx"
            onInput={(e) => setForm({ ...form, ssh: e.currentTarget.value })} /></label>
        <label class="check"><input type="checkbox" checked={form.builtin}
          onChange={(e) => setForm({ ...form, builtin: e.currentTarget.checked })} /> The built-in read-only commands run
          without asking ({view.builtin_commands.join(', ')})</label>
        <label>An approval waits (seconds, 60 to 86400)
          <input type="number" min={60} max={86400} value={form.expiry} onInput={(e) => setForm({ ...form, expiry: e.currentTarget.value })} /></label>
        <p><button type="submit">Save policy</button>{' '}
          <button type="button" class="secondary" onClick={reset}>Reset to defaults</button>{' '}
          <span role="status" class="muted">{saved}</span></p>
        <ErrorLine error={error} />
      </form>
    </>
  );
}

export function Approvals() {
  return <><ApprovalList /><PolicyEditor /></>;
}
