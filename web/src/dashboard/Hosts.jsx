// SSH hosts: add or replace (the private key and host key are write-only: sent, never shown back).
import { useState } from 'preact/hooks';
import { del, get, put } from '../api.js';
import { when } from '../format.js';
import { ErrorLine, attempt, useLoad } from './common.jsx';

const EMPTY = { alias: '', hostname: '', port: '22', user: '', private_key: '', host_key: '' };

export function Hosts() {
  const list = useLoad(() => get('/api/jarvis/hosts'));
  const [form, setForm] = useState(EMPTY);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.value });
  const save = async (e) => {
    e.preventDefault();
    const { alias, port, ...rest } = form;
    const r = await attempt(setError, () => put(`/api/jarvis/hosts/${encodeURIComponent(alias)}`, { ...rest, port: Number(port) }));
    // The keys leave the page with the request: the form is cleared whatever the answer.
    setForm((f) => ({ ...f, private_key: '', host_key: '' }));
    if (r) { setSaved(`Saved ${alias}`); setForm(EMPTY); list.reload(); }
  };
  const edit = (h) => setForm({ ...EMPTY, alias: h.alias, hostname: h.hostname, port: String(h.port), user: h.user });
  const remove = async (h) => { if ((await attempt(setError, () => del(`/api/jarvis/hosts/${encodeURIComponent(h.alias)}`))) !== undefined) list.reload(); };
  return (
    <>
      <h2>Hosts</h2>
      <ErrorLine error={list.error} /><ErrorLine error={error} />
      <table class="grid">
        <caption class="sr-only">SSH hosts</caption>
        <thead><tr><th>Alias</th><th>Host</th><th>User</th><th>Key</th><th>Host key</th><th>Source</th><th>Updated</th><th></th></tr></thead>
        <tbody>{(list.data ? list.data.hosts : []).map((h) => (
          <tr key={h.alias}><td>{h.alias}</td><td>{h.hostname}:{h.port}</td><td>{h.user}</td>
            <td>{h.key_type || ''} <code class="small">{h.key_fingerprint || ''}</code></td><td><code class="small">{h.host_key_fingerprint || ''}</code></td>
            <td>{h.source}</td><td>{when(h.updated_at)}</td>
            <td>{h.source === 'owner' && <>
              <button type="button" class="secondary" aria-label={`Replace host ${h.alias}`} onClick={() => edit(h)}>Replace</button>{' '}
              <button type="button" class="danger" aria-label={`Remove host ${h.alias}`} onClick={() => remove(h)}>Remove</button></>}</td></tr>
        ))}</tbody>
      </table>
      <h3>Add or replace a host</h3>
      <form class="stack" onSubmit={save} autocomplete="off">
        <label>Alias <input required pattern="[A-Za-z0-9][A-Za-z0-9._-]*" maxLength={64} value={form.alias} onInput={set('alias')} /></label>
        <label>Hostname <input required value={form.hostname} onInput={set('hostname')} /></label>
        <label>Port <input type="number" min={1} max={65535} value={form.port} onInput={set('port')} /></label>
        <label>User <input required value={form.user} onInput={set('user')} /></label>
        <label>Private key <textarea required rows={4} spellcheck={false} autocomplete="off" value={form.private_key} onInput={set('private_key')}
          placeholder="-----BEGIN OPENSSH PRIVATE KEY----- (write-only: never shown again)" /></label>
        <label>Host key <textarea required rows={2} spellcheck={false} value={form.host_key} onInput={set('host_key')} placeholder="ssh-ed25519 AAAA… (the server's public host key)" /></label>
        <button type="submit">Save host</button> <span role="status" class="muted">{saved}</span>
      </form>
    </>
  );
}
