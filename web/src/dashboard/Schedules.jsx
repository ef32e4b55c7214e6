// Schedules: list, create, pause/resume, delete; while an expression is typed, its next five fires
// as the server reads it (POST /api/jarvis/schedules/preview: the same parser as creating it), and a
// time-zone picker (the browser's IANA list; the server's check decides).
import { useEffect, useState } from 'preact/hooks';
import { del, describe, get, patch, post } from '../api.js';
import { ago } from '../format.js';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

const PREVIEW_DELAY_MS = 300; // after the last keystroke

function zones() {
  try {
    const list = Intl.supportedValuesOf('timeZone');
    return list.includes('UTC') ? list : ['UTC', ...list];
  } catch {
    return ['UTC'];
  }
}

/** The fires `form`'s expression would make, fetched once typing pauses; stale answers are dropped. */
function usePreview(form) {
  const [state, setState] = useState({ fires: null, error: '', timezone: '' });
  useEffect(() => {
    const text = form.expression.trim();
    if (!text) { setState({ fires: null, error: '', timezone: '' }); return undefined; }
    let stale = false;
    const timer = setTimeout(() => {
      const body = { [form.when]: text };
      if (form.timezone.trim()) body.timezone = form.timezone.trim();
      post('/api/jarvis/schedules/preview', body)
        .then((r) => { if (!stale) setState({ fires: r.fires, error: '', timezone: r.timezone }); })
        .catch((err) => { if (!stale) setState({ fires: null, error: describe(err), timezone: '' }); });
    }, PREVIEW_DELAY_MS);
    return () => { stale = true; clearTimeout(timer); };
  }, [form.when, form.expression, form.timezone]);
  return state;
}

function Preview({ preview }) {
  if (preview.error) return <p class="error" data-preview-error>{preview.error}</p>;
  if (!preview.fires) return null;
  if (!preview.fires.length) return <p class="muted" data-preview>It would never fire again.</p>;
  const local = new Intl.DateTimeFormat(undefined, { timeZone: preview.timezone, weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit' });
  return (
    <div data-preview>
      <p class="muted small">Next {preview.fires.length === 1 ? 'fire' : `${preview.fires.length} fires`} ({preview.timezone}):</p>
      <ol class="fires">{preview.fires.map((f) => <li key={f}><time datetime={f}>{local.format(new Date(f))}</time> <span class="muted">· {ago(f)}</span></li>)}</ol>
    </div>
  );
}

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
  const [tzs] = useState(zones);
  const preview = usePreview(form);
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
                  {budgetText(s) && <div class="muted" data-budget>{budgetText(s)}</div>}</td><td><Time iso={s.next_fire_at} /></td>
                <td>{s.last_run_id ? <a href={`#/dashboard/runs/${s.last_run_id}`}>run {s.last_run_id}</a> : <Time iso={s.last_fire_at} />}</td>
                <td>
                  <button type="button" class="secondary" onClick={() => toggle(s)}>{s.enabled ? 'Pause' : 'Resume'}</button>{' '}
                  <button type="button" class="danger" aria-label={`Delete schedule ${s.name}`} onClick={() => remove(s)}>Delete</button>
                </td>
              </tr>
            ))}
            {list.data.schedules.length === 0 && <EmptyRow cols={9}>No schedules yet: create one below, or ask in the chat ("check my disks every morning at 8").</EmptyRow>}
          </tbody>
        </table>
      )}
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
        <label>Expression <input required value={form.expression} onInput={set('expression')} aria-describedby="schedule-preview" placeholder={form.when === 'cron' ? '0 8 * * 1-5' : form.when === 'rate' ? '15 minutes' : '2026-12-01T09:00:00'} /></label>
        <div id="schedule-preview" aria-live="polite"><Preview preview={preview} /></div>
        <label>Time zone <input list="schedule-zones" autocomplete="off" value={form.timezone} onInput={set('timezone')} placeholder="your notification policy's (e.g. Europe/Berlin)" /></label>
        <datalist id="schedule-zones">{tzs.map((z) => <option key={z} value={z} />)}</datalist>
        <button type="submit">Create schedule</button>
      </form>
    </>
  );
}
