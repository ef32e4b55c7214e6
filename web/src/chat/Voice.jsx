// Voice through the browser's own speech APIs, where it has them; OpenAI Realtime when the user asks
// for it and the server can mint a session (POST /api/jarvis/realtime/session: each one is a paid,
// short-lived OpenAI session, so it is minted on that click, never on page load).
import { useRef, useState } from 'preact/hooks';
import { describe, post } from '../api.js';

const Recognition = typeof window !== 'undefined' ? (window.SpeechRecognition || window.webkitSpeechRecognition) : null;
const synth = typeof window !== 'undefined' && 'speechSynthesis' in window ? window.speechSynthesis : null;

export function speak(text) {
  if (!synth || !text) return;
  synth.cancel();
  const plain = text.replace(/[#*_`>|[\]()-]+/g, ' ').slice(0, 3000);
  synth.speak(new SpeechSynthesisUtterance(plain));
}

export function Voice({ onText, readAloud, setReadAloud }) {
  const [listening, setListening] = useState(false);
  const [problem, setProblem] = useState('');
  const [realtime, setRealtime] = useState(null); // the minted session, once asked for
  const [minting, setMinting] = useState(false);
  const rec = useRef(null);

  const useRealtime = () => {
    setMinting(true);
    setProblem('');
    post('/api/jarvis/realtime/session')
      .then((s) => setRealtime(s))
      .catch((err) => setProblem(describe(err)))
      .finally(() => setMinting(false));
  };

  const listen = () => {
    if (listening) { rec.current?.stop(); return; }
    const r = new Recognition();
    r.lang = navigator.language || 'en-US';
    r.interimResults = false;
    r.maxAlternatives = 1;
    r.onresult = (e) => onText(Array.from(e.results).map((x) => x[0].transcript).join(' '));
    r.onerror = (e) => setProblem(`Voice input failed: ${e.error}`);
    r.onend = () => setListening(false);
    rec.current = r;
    setProblem('');
    setListening(true);
    try { r.start(); } catch (err) { setListening(false); setProblem(describe(err)); }
  };

  return (
    <fieldset class="menu-group voice">
      <legend>Voice</legend>
      {Recognition
        ? <button type="button" class="secondary" aria-pressed={listening} onClick={listen}>Speak</button>
        : <span class="muted">Voice input is not supported in this browser</span>}
      {synth && (
        <label><input type="checkbox" checked={readAloud} onChange={(e) => setReadAloud(e.currentTarget.checked)} /> Read answers aloud</label>
      )}
      {!realtime && <button type="button" class="secondary" disabled={minting} onClick={useRealtime}>Use OpenAI voice</button>}
      {realtime && (
        <span class="muted">OpenAI voice session ready ({realtime.model}, until {new Date(realtime.expires_at * 1000 || realtime.expires_at).toLocaleTimeString()})</span>
      )}
      {problem && <span class="error" role="alert">{problem}</span>}
    </fieldset>
  );
}
