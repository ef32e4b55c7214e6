// MCP servers (issue 30): the owner's tool servers whose tools workers get as mcp__<server>__<tool>.
// A bearer token is write-only (sent, sealed, never shown back); a server's descriptions are its own text,
// shown as plain text (never markup), cut to ABOUT_MAX characters with the whole in the title.
import { useState } from 'preact/hooks';
import { del, get, post, put } from '../api.js';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

const ABOUT_MAX = 160; // characters of a tool's description shown in the row (the whole of it on hover)
const about = (text) => { const t = (text || '').replace(/\s+/g, ' ').trim(); return t.length > ABOUT_MAX ? `${t.slice(0, ABOUT_MAX)}…` : t; };

const EMPTY = { name: '', kind: 'url', where: '', token: '', no_token: false, allow_private: false };

export function Mcp() {
  const list = useLoad(() => get('/api/jarvis/mcp/servers'));
  const [form, setForm] = useState(EMPTY);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const path = (name) => `/api/jarvis/mcp/servers/${encodeURIComponent(name)}`;
  const save = async (e) => {
    e.preventDefault();
    const body = form.kind === 'url'
      ? { url: form.where, allow_private: form.allow_private,
        ...(form.no_token ? { auth: 'none' } : form.token ? { bearer_token: form.token } : {}) }
      : { command: form.where };
    const r = await attempt(setError, () => put(path(form.name), body));
    setForm((f) => ({ ...f, token: '' })); // the token leaves the page with the request, whatever the answer
    if (r) { setSaved(`Saved ${form.name}: ${r.tool_count} tool(s)${r.listing_note ? ` (${r.listing_note})` : ''}`); setForm(EMPTY); list.reload(); }
  };
  const relist = async (s) => { if (await attempt(setError, () => post(`${path(s.name)}/tools`, {}))) list.reload(); };
  const remove = async (s) => { if ((await attempt(setError, () => del(path(s.name)))) !== undefined) list.reload(); };
  const servers = list.data ? list.data.servers : [];
  return (
    <>
      <h2>MCP servers</h2>
      <p class="muted">Workers call their tools as <code>mcp__server__tool</code>. A tool the server does not mark read-only asks for your approval first (Approvals sets it per tool).</p>
      <ErrorLine error={list.error} /><ErrorLine error={error} />
      <table class="grid">
        <caption class="sr-only">MCP servers</caption>
        <thead><tr><th>Name</th><th>Where</th><th>Auth</th><th>Tools</th><th>Listed</th><th></th></tr></thead>
        <tbody>{servers.map((s) => (
          <tr key={s.name}><td>{s.name}</td><td><code class="small">{s.url || `$ ${s.command}`}</code></td><td>{s.auth}</td>
            <td>{s.tools.length ? s.tools.map((t) => (
              <div key={t.exposed} class="mcp-tool"><code class="small">{t.exposed}</code>{t.read_only ? ' (read-only)' : ''}
                {t.description && <div class="muted small mcp-about" title={t.description}>{about(t.description)}</div>}</div>)) : '—'}
              {s.listing_note && <div class="muted">{s.listing_note}</div>}</td>
            <td>{s.listed_at ? <Time iso={s.listed_at} /> : 'never'}</td>
            <td><button type="button" class="secondary" aria-label={`List the tools of ${s.name} again`} onClick={() => relist(s)}>List again</button>{' '}
              <button type="button" class="danger" aria-label={`Remove MCP server ${s.name}`} onClick={() => remove(s)}>Remove</button></td></tr>
        ))}
        {list.data && servers.length === 0 && <EmptyRow cols={6}>No MCP servers yet: add one below, and workers can call its tools.</EmptyRow>}</tbody>
      </table>
      <h3>Add or replace a server</h3>
      <form class="stack" onSubmit={save} autocomplete="off">
        <label>Name <input required pattern="[a-z0-9][a-z0-9\-]*" maxLength={24} value={form.name} onInput={set('name')} /></label>
        <label>Kind <select value={form.kind} onChange={set('kind')}>
          <option value="url">Remote (streamable HTTP URL)</option><option value="command">Local command (stdio, in the sandbox)</option></select></label>
        <label>{form.kind === 'url' ? 'URL' : 'Command'} <input required value={form.where} onInput={set('where')}
          placeholder={form.kind === 'url' ? 'https://mcp.example.com/mcp' : 'mcp-server-time --local-timezone UTC'} /></label>
        {form.kind === 'url' && <>
          <label>Bearer token <input type="password" autocomplete="off" value={form.token} onInput={set('token')} disabled={form.no_token}
            placeholder="write-only; leave empty to keep the stored token" /></label>
          <label class="check"><input type="checkbox" checked={form.no_token} onChange={set('no_token')} /> No token (remove a stored one)</label>
          <label class="check"><input type="checkbox" checked={form.allow_private} onChange={set('allow_private')} /> Its host may be a private or loopback address</label></>}
        <button type="submit">Save server</button> <span role="status" class="muted">{saved}</span>
      </form>
    </>
  );
}
