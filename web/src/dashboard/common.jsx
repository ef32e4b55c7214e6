// What every dashboard panel shares: loading a resource, API errors as readable lines, times as
// "3 min ago" with the exact time on hover, empty tables that say so, and value bars.
import { useEffect, useState } from 'preact/hooks';
import { describe } from '../api.js';
import { ago, when } from '../format.js';

/** {data, error, reload} for an async loader; re-run when `deps` change. */
export function useLoad(loader, deps = []) {
  const [data, setData] = useState(null);
  const [error, setError] = useState('');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stop = false;
    setError('');
    loader().then((d) => { if (!stop) setData(d); }).catch((err) => { if (!stop) { setError(describe(err)); setData(null); } });
    return () => { stop = true; };
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1), setData };
}

export function ErrorLine({ error }) {
  return error ? <p class="error" role="alert">{error}</p> : null;
}

/** Run an action, reporting its error; returns the action's result (undefined on error). */
export async function attempt(setError, fn) {
  setError('');
  try {
    return await fn();
  } catch (err) {
    setError(describe(err));
    return undefined;
  }
}

// One shared half-minute tick for every relative time on the page (not a timer per cell).
const tickers = new Set();
let timer = null;
function useMinuteTick() {
  const [, setNow] = useState(0);
  useEffect(() => {
    tickers.add(setNow);
    if (!timer) timer = setInterval(() => tickers.forEach((f) => f(Date.now())), 30_000);
    return () => { tickers.delete(setNow); if (!tickers.size) { clearInterval(timer); timer = null; } };
  }, []);
}

/** A time as "3 min ago", the exact local time on hover and to assistive technology. */
export function Time({ iso }) {
  useMinuteTick();
  if (!iso) return null;
  const exact = when(iso);
  return <time datetime={iso} title={exact}>{ago(iso)}</time>;
}

/** A table's "nothing here" line: one row across every column. */
export function EmptyRow({ cols, children }) {
  return <tr class="empty-row"><td colSpan={cols}>{children}</td></tr>;
}

/** A value's bar beside its number (a share of `max`), e.g. a run's cost in the run list. */
export function ValueBar({ value, max, label }) {
  const pct = max > 0 ? Math.max(value > 0 ? 2 : 0, Math.round((value / max) * 100)) : 0;
  return (
    <span class="value-bar">
      <span class="value-bar-track" aria-hidden="true"><span class="value-bar-fill" style={{ width: `${pct}%` }} /></span>
      <span class="value-bar-text">{label}</span>
    </span>
  );
}
