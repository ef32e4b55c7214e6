// SSH hosts: add or replace (the private key and host key are write-only: sent, never shown back), and
// "test connection": a harmless `true` through ssh_exec on the host, its outcome as a sentence.
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { del, get, post, put } from '../api.js';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

const EMPTY = { alias: '', hostname: '', port: '22', user: '', private_key: '', host_key: '' };

export function Hosts() {
  const list = useLoad(() => get('/api/jarvis/hosts'));
  const [form, setForm] = useState(EMPTY);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const [tests, setTests] = useState({}); // alias -> {busy} | the answer of POST .../test
  const test = async (h) => {
    setTests((t) => ({ ...t, [h.alias]: { busy: true } }));
    const r = await attempt(setError, () => post(`/api/jarvis/hosts/${encodeURIComponent(h.alias)}/test`, {}));
    setTests((t) => ({ ...t, [h.alias]: r || undefined }));
  };
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
      <table class="grid hosts">
        <caption class="sr-only">SSH hosts</caption>
        <thead><tr><th>Alias</th><th>Host</th><th>User</th><th>Key</th><th>Host key</th><th>Source</th><th>Updated</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>{(list.data ? list.data.hosts : []).map((h) => (
          <Fragment key={h.alias}>
          <tr><td>{h.alias}</td><td>{h.hostname}:{h.port}</td><td>{h.user}</td>
            <td>{h.key_type || ''} <code class="small">{h.key_fingerprint || ''}</code></td><td><code class="small">{h.host_key_fingerprint || ''}</code></td>
            <td>{h.source}</td><td><Time iso={h.updated_at} /></td>
            <td>
              <button type="button" class="secondary" aria-label={`Test connection to ${h.alias}`} disabled={tests[h.alias] && tests[h.alias].busy}
                onClick={() => test(h)}>{tests[h.alias] && tests[h.alias].busy ? 'Testing…' : 'Test connection'}</button>{' '}
              {h.source === 'owner' && <>
              <button type="button" class="secondary" aria-label={`Replace host ${h.alias}`} onClick={() => edit(h)}>Replace</button>{' '}
              <button type="button" class="danger" aria-label={`Remove host ${h.alias}`} onClick={() => remove(h)}>Remove</button></>}</td></tr>
          <tr class="test-row"><td colSpan={8}><TestResult alias={h.alias} answer={tests[h.alias]} /></td></tr>
          </Fragment>
        ))}
        {list.data && list.data.hosts.length === 0 && <EmptyRow cols={8}>No SSH hosts yet: add one below, and workers can run commands there.</EmptyRow>}
        </tbody>
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

function TestResult({ alias, answer }) {
  if (!answer || answer.busy) return <p role="status" class="small test-result" data-alias={alias} />;
  return (
    <p role="status" class={`small test-result ${answer.ok ? 'ok' : 'error'}`} data-test-result data-alias={alias} data-ok={String(answer.ok)}>
      {answer.ok ? '✓ ' : '✗ '}{answer.message}
    </p>
  );
}
