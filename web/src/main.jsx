import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { SkipLink } from './a11y.jsx';
import { get, onSignedOut, post, describe } from './api.js';
import { Chat } from './chat/Chat.jsx';
import { Inbox } from './chat/Inbox.jsx';
import { Dashboard } from './dashboard/Dashboard.jsx';
import './style.css';

function useHash() {
  const [hash, setHash] = useState(location.hash || '#/');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function SignIn({ onSignedIn }) {
  const [secret, setSecret] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const field = useRef(null);
  useEffect(() => { field.current?.focus(); }, []);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await post('/api/jarvis/auth', { device_secret: secret });
      setSecret('');
      onSignedIn();
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Jarvis</h1>
      <form onSubmit={submit}>
        <label for="device-secret">Device secret</label>
        <input id="device-secret" type="password" autocomplete="current-password" required ref={field} value={secret}
          onInput={(e) => setSecret(e.currentTarget.value)} />
        <button type="submit" disabled={busy}>Sign in</button>
        {error && <p role="alert" class="error">{error}</p>}
      </form>
    </main>
  );
}

function App() {
  const hash = useHash();
  const [session, setSession] = useState('checking'); // checking | in | out
  const [problem, setProblem] = useState('');
  const [owner, setOwner] = useState(''); // the signed-in owner's name (GET /api/jarvis/me)

  const check = async () => {
    try {
      await get('/api/jarvis/thread?limit=1');
      setSession('in');
      setProblem('');
    } catch (err) {
      if (err.status === 401) setSession('out');
      else { setSession('out'); setProblem(describe(err)); }
    }
  };
  useEffect(() => { check(); return onSignedOut(() => setSession('out')); }, []);
  useEffect(() => {
    if (session !== 'in') return;
    get('/api/jarvis/me').then((me) => setOwner(me.name)).catch(() => setOwner('')); // an older server: no name
  }, [session]);

  const signOut = async () => {
    try { await post('/api/jarvis/logout'); } catch { /* the session is gone either way */ }
    setSession('out');
  };

  if (session === 'checking') return <p class="loading">Loading…</p>;
  if (session === 'out') return <><SignIn onSignedIn={() => setSession('in')} />{problem && <p class="error">{problem}</p>}</>;

  const route = hash.replace(/^#\/?/, '');
  const [section, ...rest] = route.split('/');
  return (
    <div class="shell">
      <SkipLink />
      <header class="top">
        <a class="brand" href="#/">Jarvis</a>
        <nav aria-label="Main">
          <a href="#/" aria-current={section === '' ? 'page' : undefined}>Chat</a>
          <a href="#/inbox" aria-current={section === 'inbox' ? 'page' : undefined}>Inbox</a>
          <a href="#/dashboard/workers" aria-current={section === 'dashboard' ? 'page' : undefined}>Dashboard</a>
        </nav>
        <button type="button" class="secondary" onClick={signOut}>Sign out</button>
      </header>
      {/* The chat stays mounted (hidden) while other pages show: a running run keeps streaming. */}
      <div hidden={section !== ''}><Chat visible={section === ''} owner={owner} /></div>
      {section === 'inbox' && <Inbox />}
      {section === 'dashboard' && <Dashboard panel={rest[0] || 'workers'} args={rest.slice(1)} />}
    </div>
  );
}

render(<App />, document.getElementById('app'));
