// The user's answer preferences (sent with each supervisor run): kept on this device, shown in the
// chat's settings menu (Menu.jsx).
import { useState } from 'preact/hooks';

const KEY = 'jarvis.preferences';

export function loadPreferences() {
  try {
    const p = JSON.parse(localStorage.getItem(KEY) || '{}');
    return { verbosity: p.verbosity === 'detailed' ? 'detailed' : 'concise', notify: p.notify === true };
  } catch {
    return { verbosity: 'concise', notify: false };
  }
}

export function Settings() {
  const [prefs, setPrefs] = useState(loadPreferences);
  const save = (next) => {
    setPrefs(next);
    localStorage.setItem(KEY, JSON.stringify(next));
  };
  return (
    <fieldset class="menu-group" aria-label="Answer preferences">
      <legend>Answers</legend>
      <label>Answer length{' '}
        <select value={prefs.verbosity} onChange={(e) => save({ ...prefs, verbosity: e.currentTarget.value })}>
          <option value="concise">Concise</option>
          <option value="detailed">Detailed</option>
        </select>
      </label>
      <label>
        <input type="checkbox" checked={prefs.notify} onChange={(e) => save({ ...prefs, notify: e.currentTarget.checked })} />
        {' '}Email me the answer when a run ends
      </label>
    </fieldset>
  );
}
