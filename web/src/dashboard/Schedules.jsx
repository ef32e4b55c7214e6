// Schedules: list, create, pause/resume, delete.
import { useState } from 'preact/hooks';
import { del, get, patch, post } from '../api.js';
import { when } from '../format.js';
import { ErrorLine, attempt, useLoad } from './common.jsx';

const EMPTY = { name: '', kind: 'check', task: '', when: 'cron', expression: '', timezone: '' };

// A check's budgets, as the schedule's state cell says them (issue 27): "$0.01 per fire · $0.05 per day".
const budgetText = (s) => [
  s.fire_usd_budget != null && `$${s.fire_usd_budget} per fire`, s.fire_token_budget != null && `${s.fire_token_budget} tokens per fire`,
  s.day_usd_budget != null && `$${s.day_usd_budget} per day`, s.day_token_budget != null && `${s.day_token_budget} tokens per day`,
].filter(Boolean).join(' · ');

export function Schedules() {
  const list = useLoad(() => get('/api/jarvis/schedules'));
  const [form, setForm] = useState(EMPTY);
  const [error, setError] = useState('');
  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.value });

  const create = async (e) => {
    e.preventDefault();
    const body = { name: form.name, kind: form.kind, [form.when]: form.expression };
    if (form.task) body.task = form.task;
    if (form.timezone) body.timezone = form.timezone;
    if (await attempt(setError, () => post('/api/jarvis/schedules', body))) { setForm(EMPTY); list.reload(); }
  };
  const toggle = async (s) => { if (await attempt(setError, () => patch(`/api/jarvis/schedules/${s.id}`, { enabled: !s.enabled }))) list.reload(); };
  const remove = async (s) => { if ((await attempt(setError, () => del(`/api/jarvis/schedules/${s.id}`))) !== undefined) list.reload(); };

  return (
    <>
      <h2>Schedules</h2>
      <ErrorLine error={list.error} />
      <ErrorLine error={error} />
      {list.data && (
        <table class="grid">
          <caption class="sr-only">Schedules</caption>
          <thead><tr><th>Name</th><th>Kind</th><th>Task</th><th>When</th><th>Time zone</th><th>State</th><th>Next</th><th>Last</th><th>Actions</th></tr></thead>
          <tbody>
            {list.data.schedules.map((s) => (
              <tr key={s.id} data-schedule-id={s.id}>
                <td>{s.name}</td><td>{s.kind}</td><td>{s.task}</td><td><code>{s.cron || s.rate || s.at}</code></td><td>{s.timezone}</td>
                <td data-state>{s.enabled ? 'active' : s.idle_paused_at ? 'paused: nobody looked at its results' : 'paused'}
                  {budgetText(s) && <div class="muted" data-budget>{budgetText(s)}</div>}</td><td>{when(s.next_fire_at)}</td>
                <td>{s.last_run_id ? <a href={`#/dashboard/runs/${s.last_run_id}`}>run {s.last_run_id}</a> : when(s.last_fire_at)}</td>
                <td>
                  <button type="button" class="secondary" onClick={() => toggle(s)}>{s.enabled ? 'Pause' : 'Resume'}</button>{' '}
                  <button type="button" class="danger" aria-label={`Delete schedule ${s.name}`} onClick={() => remove(s)}>Delete</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data && list.data.schedules.length === 0 && <p>No schedules yet.</p>}
      <h3>New schedule</h3>
      <form class="stack" onSubmit={create}>
        <label>Name <input required maxLength={100} value={form.name} onInput={set('name')} /></label>
        <label>Kind <select value={form.kind} onChange={set('kind')}>
          <option value="check">check (a background run)</option><option value="digest">digest (morning email)</option><option value="reminder">reminder (a message)</option>
        </select></label>
        <label>Task <textarea rows={2} value={form.task} onInput={set('task')} /></label>
        <label>Timing <select value={form.when} onChange={set('when')}>
          <option value="cron">cron (m h dom mon dow)</option><option value="rate">rate (e.g. 15 minutes)</option><option value="at">at (one-off local time)</option>
        </select></label>
        <label>Expression <input required value={form.expression} onInput={set('expression')} placeholder={form.when === 'cron' ? '0 8 * * 1-5' : form.when === 'rate' ? '15 minutes' : '2026-12-01T09:00:00'} /></label>
        <label>Time zone <input value={form.timezone} onInput={set('timezone')} placeholder="the policy's (e.g. Europe/Berlin)" /></label>
        <button type="submit">Create schedule</button>
      </form>
    </>
  );
}
