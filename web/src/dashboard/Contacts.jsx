// Contacts (add, verify, remove), the notification policy, and the notifications log.
import { useState } from 'preact/hooks';
import { del, get, patch, post, qs } from '../api.js';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

function Policy() {
  const policy = useLoad(() => get('/api/jarvis/policy'));
  const [quiet, setQuiet] = useState(null);
  const [tz, setTz] = useState(null);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const p = policy.data;
  const save = async (e) => {
    e.preventDefault();
    const body = {};
    if (quiet !== null) body.quiet_hours = quiet.trim() || 'off';
    if (tz !== null) body.timezone = tz.trim();
    const r = await attempt(setError, () => patch('/api/jarvis/policy', body));
    if (r) { policy.setData(r); setQuiet(null); setTz(null); setSaved('Policy saved'); }
  };
  return (
    <section aria-label="Notification policy">
      <h3>Notification policy</h3>
      <ErrorLine error={policy.error} /><ErrorLine error={error} />
      {p && (
        <form class="stack" onSubmit={save}>
          <p class="muted">Channels: {Object.entries(p.channels).map(([sev, chs]) => `${sev} → ${chs.join(', ') || 'none'}`).join(' · ')};
            limits {p.daily_email_limit} emails, {p.daily_sms_limit} SMS a day; {p.daily_usd_cap == null ? 'no spending cap' : `$${p.daily_usd_cap} a day`}.</p>
          <label>Time zone <input value={tz ?? p.timezone} onInput={(e) => setTz(e.currentTarget.value)} /></label>
          <label>Quiet hours <input value={quiet ?? (p.quiet_hours || '')} placeholder="22:00-07:00 (empty: off)" onInput={(e) => setQuiet(e.currentTarget.value)} /></label>
          <button type="submit">Save policy</button> <span role="status" class="muted">{saved}</span>
        </form>
      )}
    </section>
  );
}

function NotificationLog() {
  const [before, setBefore] = useState(undefined);
  const log = useLoad(() => get(`/api/jarvis/notifications${qs({ limit: 50, before_id: before })}`), [before]);
  return (
    <section aria-label="Notifications log">
      <h3>Notifications</h3>
      <ErrorLine error={log.error} />
      <table class="grid">
        <caption class="sr-only">Notifications, newest first</caption>
        <thead><tr><th>When</th><th>Channel</th><th>Purpose</th><th>Severity</th><th>Status</th><th>To</th><th>Subject</th></tr></thead>
        <tbody>{(log.data ? log.data.notifications : []).map((n) => (
          <tr key={n.id} data-status={n.status}><td><Time iso={n.created_at} /></td><td>{n.channel}</td><td>{n.purpose}</td><td>{n.severity || ''}</td>
            <td>{n.status}{n.reason ? ` (${n.reason})` : ''}</td><td>{n.address || ''}</td><td>{n.subject || n.body.slice(0, 80)}</td></tr>
        ))}
        {log.data && log.data.notifications.length === 0 && <EmptyRow cols={7}>No notifications sent yet.</EmptyRow>}
        </tbody>
      </table>
      {log.data && log.data.next_before_id && <button type="button" class="secondary" onClick={() => setBefore(log.data.next_before_id)}>Older notifications</button>}
    </section>
  );
}

export function Contacts() {
  const list = useLoad(() => get('/api/jarvis/contacts'));
  const [kind, setKind] = useState('email');
  const [address, setAddress] = useState('');
  const [pending, setPending] = useState(null); // {kind, address}
  const [code, setCode] = useState('');
  const [error, setError] = useState('');
  const add = async (e) => {
    e.preventDefault();
    const r = await attempt(setError, () => post('/api/jarvis/contacts', { kind, address }));
    if (r) { setPending({ kind, address }); setAddress(''); list.reload(); }
  };
  const verify = async (e) => {
    e.preventDefault();
    const r = await attempt(setError, () => post('/api/jarvis/contacts/verify', { ...pending, code }));
    if (r) { setPending(null); setCode(''); list.reload(); }
  };
  const remove = async (c) => { if ((await attempt(setError, () => del(`/api/jarvis/contacts/${c.id}`))) !== undefined) list.reload(); };
  return (
    <>
      <h2>Contacts</h2>
      <ErrorLine error={list.error} /><ErrorLine error={error} />
      <table class="grid">
        <caption class="sr-only">Contacts</caption>
        <thead><tr><th>Kind</th><th>Address</th><th>Verified</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>{(list.data ? list.data.contacts : []).map((c) => (
          <tr key={c.id}><td>{c.kind}</td><td>{c.address}</td><td>{c.verified ? <>yes (<Time iso={c.verified_at} />)</> : 'no'}{c.opted_out_at ? ' · opted out' : ''}</td>
            <td>{!c.verified && <button type="button" class="secondary" onClick={() => setPending({ kind: c.kind, address: c.address })}>Enter code</button>}{' '}
              <button type="button" class="danger" aria-label={`Remove contact ${c.address}`} onClick={() => remove(c)}>Remove</button></td></tr>
        ))}
        {list.data && list.data.contacts.length === 0 && <EmptyRow cols={4}>No contacts yet: add an email address or phone number below to get alerts.</EmptyRow>}
        </tbody>
      </table>
      <form class="inline" onSubmit={add}>
        <label>Kind <select value={kind} onChange={(e) => setKind(e.currentTarget.value)}><option value="email">email</option><option value="sms">sms</option></select></label>
        <label>Address <input required value={address} onInput={(e) => setAddress(e.currentTarget.value)} placeholder="you@example.com or +15551234567" /></label>
        <button type="submit">Add contact</button>
      </form>
      {pending && (
        <form class="inline" onSubmit={verify}>
          <label>Code sent to {pending.address} <input required inputMode="numeric" pattern="\s*\d{6}\s*" value={code} onInput={(e) => setCode(e.currentTarget.value)} /></label>
          <button type="submit">Verify</button>
        </form>
      )}
      <Policy />
      <NotificationLog />
    </>
  );
}
