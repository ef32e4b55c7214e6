// What every dashboard panel shares: loading a resource, and API errors as readable lines.
import { useEffect, useState } from 'preact/hooks';
import { describe } from '../api.js';

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
