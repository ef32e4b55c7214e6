// One way to call the API: same origin, the HttpOnly session cookie, {"error","message"} errors.
// Every request carries X-Zerg-Client: with the browser's Origin, it is the proof the server asks of
// a cookie session before a POST, PUT, PATCH or DELETE (another page cannot add a header without a
// CORS preflight, which the server never grants).

export const CLIENT_HEADERS = { 'X-Zerg-Client': 'web' };

export class ApiError extends Error {
  constructor(status, error, message) {
    super(message);
    this.status = status;
    this.error = error;
  }
  /** This server has no such route (an older server): the feature is "not available". */
  get missingRoute() {
    return this.status === 404 && /^no route /.test(this.message);
  }
}

const listeners = new Set();
/** Called with no argument when any request answers 401 (the session ended). */
export function onSignedOut(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export async function api(method, path, body, { headers = {}, raw = false, signal } = {}) {
  const init = { method, headers: { ...CLIENT_HEADERS, ...headers }, credentials: 'same-origin', signal };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'network', 'The server cannot be reached; check the connection and try again.');
  }
  if (resp.status === 401 && path !== '/api/jarvis/auth') listeners.forEach((fn) => fn());
  if (raw && resp.ok) return resp;
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const message = (data && data.message) || `${resp.status} ${resp.statusText || 'error'}`;
    throw new ApiError(resp.status, (data && data.error) || `http_${resp.status}`, message);
  }
  return data;
}

export const get = (path, opts) => api('GET', path, undefined, opts);
export const post = (path, body, opts) => api('POST', path, body === undefined ? {} : body, opts);
export const put = (path, body, opts) => api('PUT', path, body, opts);
export const patch = (path, body, opts) => api('PATCH', path, body, opts);
export const del = (path, opts) => api('DELETE', path, undefined, opts);

/** A query string from an object, leaving out empty values. */
export function qs(params) {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

/** A readable line for any error the API (or the network) gave. */
export function describe(err) {
  if (!err) return '';
  if (err instanceof ApiError && err.missingRoute) return 'not available';
  return err.message || String(err);
}

export function isMissingRoute(err) {
  return err instanceof ApiError && err.missingRoute;
}
