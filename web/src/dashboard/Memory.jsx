// Memory: files (list, view, edit, versions, delete), organisational facts, search.
import { useState } from 'preact/hooks';
import { del, get, post, put, qs } from '../api.js';
import { bytes, when } from '../format.js';
import { EmptyRow, ErrorLine, Time, attempt, useLoad } from './common.jsx';

function FileEditor({ path, onChanged }) {
  const doc = useLoad(() => get(`/api/jarvis/memory/file${qs({ path })}`), [path]);
  const versions = useLoad(() => get(`/api/jarvis/memory/file/versions${qs({ path })}`), [path]);
  const [draft, setDraft] = useState(null);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const content = draft ?? (doc.data ? doc.data.content : '');
  const save = async () => {
    const r = await attempt(setError, () => put(`/api/jarvis/memory/file${qs({ path })}`, { content }));
    if (r) { setSaved(`Saved ${when(new Date().toISOString())}`); setDraft(null); doc.reload(); versions.reload(); onChanged(); }
  };
  const remove = async () => { if ((await attempt(setError, () => del(`/api/jarvis/memory/file${qs({ path })}`))) !== undefined) onChanged(true); };
  const restore = async (id) => {
    if (await attempt(setError, () => post(`/api/jarvis/memory/file/restore${qs({ path, version_id: id })}`))) { setDraft(null); doc.reload(); versions.reload(); onChanged(); }
  };
  return (
    <section class="editor" aria-label={`Memory file ${path}`}>
      <h3>{path}</h3>
      <ErrorLine error={doc.error} /><ErrorLine error={error} />
      {doc.data && <p class="muted">{doc.data.title} · written by {doc.data.writer} · <Time iso={doc.data.updated_at} /></p>}
      <label for="memory-content">Content</label>
      <textarea id="memory-content" rows={14} value={content} onInput={(e) => setDraft(e.currentTarget.value)} />
      <p>
        <button type="button" onClick={save} disabled={draft === null}>Save</button>{' '}
        <button type="button" class="danger" onClick={remove}>Delete file</button>{' '}
        <span class="muted" role="status">{saved}</span>
      </p>
      <h4>Versions</h4>
      <ErrorLine error={versions.error} />
      <ul>{(versions.data ? versions.data.versions : []).map((v) => (
        <li key={v.id}><Time iso={v.written_at} /> by {v.writer} ({v.reason}, {bytes(v.size)}){' '}
          <button type="button" class="secondary" onClick={() => restore(v.id)}>Restore version {v.id}</button></li>
      ))}</ul>
    </section>
  );
}

export function Memory() {
  const [prefix, setPrefix] = useState('');
  const files = useLoad(() => get(`/api/jarvis/memory/files${qs({ prefix, limit: 200 })}`), [prefix]);
  const facts = useLoad(() => get('/api/jarvis/memory/facts'));
  const [open, setOpen] = useState(null);
  const [newPath, setNewPath] = useState('');
  const [q, setQ] = useState('');
  const [hits, setHits] = useState(null);
  const [error, setError] = useState('');

  const search = async (e) => {
    e.preventDefault();
    const r = await attempt(setError, () => get(`/api/jarvis/memory/search${qs({ q })}`));
    if (r) setHits(r);
  };
  const create = async (e) => {
    e.preventDefault();
    const r = await attempt(setError, () => put(`/api/jarvis/memory/file${qs({ path: newPath })}`, { content: `# ${newPath}\n` }));
    if (r) { files.reload(); setOpen(newPath); setNewPath(''); }
  };
  const forget = async (id) => { if ((await attempt(setError, () => del(`/api/jarvis/memory/facts/${id}`))) !== undefined) facts.reload(); };

  return (
    <>
      <h2>Memory</h2>
      <ErrorLine error={error} />
      <form class="filters" onSubmit={search} role="search" aria-label="Search memory">
        <label>Search memory <input type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} required /></label>
        <button type="submit">Search</button>
      </form>
      {hits && (
        <ul class="hits" aria-label="Search results">
          {hits.hits.length === 0 && <li>No matches.</li>}
          {hits.hits.map((h) => <li key={h.path}><button type="button" class="link" onClick={() => setOpen(h.path)}>{h.path}</button> — {h.snippet} <span class="muted">({h.method})</span></li>)}
          {hits.note && <li class="muted">{hits.note}</li>}
        </ul>
      )}
      <div class="split">
        <section aria-label="Memory files">
          <h3>Files</h3>
          <label>Path prefix <input value={prefix} onInput={(e) => setPrefix(e.currentTarget.value)} placeholder="notes/" /></label>
          <ErrorLine error={files.error} />
          {files.data && <p class="muted">{files.data.total} files</p>}
          <ul class="files">{(files.data ? files.data.files : []).map((f) => (
            <li key={f.path}><button type="button" class="link" aria-pressed={open === f.path} onClick={() => setOpen(f.path)}>{f.path}</button> <span class="muted">{f.title} · {bytes(f.size)}</span></li>
          ))}</ul>
          <form onSubmit={create} class="inline">
            <label>New file path <input value={newPath} onInput={(e) => setNewPath(e.currentTarget.value)} placeholder="notes/servers.md" required /></label>
            <button type="submit">Create file</button>
          </form>
        </section>
        {open && <FileEditor key={open} path={open} onChanged={(gone) => { files.reload(); if (gone) setOpen(null); }} />}
      </div>
      <h3>Facts</h3>
      <ErrorLine error={facts.error} />
      <table class="grid">
        <caption class="sr-only">Facts, most important first</caption>
        <thead><tr><th>Category</th><th>Content</th><th>Importance</th><th>Written by</th><th>Updated</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>{(facts.data ? facts.data.facts : []).map((f) => (
          <tr key={f.id}><td>{f.category}</td><td>{f.content}</td><td>{f.importance}</td><td>{f.writer}</td><td><Time iso={f.updated_at} /></td>
            <td><button type="button" class="secondary" aria-label={`Forget fact ${f.id}`} onClick={() => forget(f.id)}>Forget</button></td></tr>
        ))}
        {facts.data && facts.data.facts.length === 0 && <EmptyRow cols={6}>No facts yet: tell the assistant something worth remembering ("our backups run at 2am").</EmptyRow>}
        </tbody>
      </table>
    </>
  );
}
