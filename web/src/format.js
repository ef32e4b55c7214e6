// Small pure formatters shared by the pages.

export function duration(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

export function usd(v) {
  if (v === null || v === undefined) return '';
  return `$${Number(v).toFixed(v < 0.01 && v > 0 ? 5 : 4)}`;
}

export function num(v) {
  return v === null || v === undefined ? '' : Number(v).toLocaleString('en-US');
}

export function bytes(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function isoDay(date) {
  return date.toISOString().slice(0, 10);
}

/** Milliseconds between two ISO times, or null. */
export function between(a, b) {
  if (!a || !b) return null;
  return new Date(b).getTime() - new Date(a).getTime();
}

/** The path of a worker file in the API (a folder has its own route; deeper paths use %2F). */
export function workerFileUrl(jobId, path) {
  const parts = path.split('/');
  if (parts.length === 2) return `/api/jarvis/workers/${jobId}/files/${encodeURIComponent(parts[0])}/${encodeURIComponent(parts[1])}`;
  return `/api/jarvis/workers/${jobId}/files/${encodeURIComponent(path)}`;
}

/** thread.jsonl as messages: one JSON object per line; lines that are not JSON are shown as text. */
export function parseJsonl(text) {
  return text.split('\n').filter((l) => l.trim()).map((line) => {
    try {
      const obj = JSON.parse(line);
      const content = typeof obj.content === 'string' ? obj.content
        : obj.content == null ? '' : JSON.stringify(obj.content, null, 2);
      const calls = obj.tool_calls ? JSON.stringify(obj.tool_calls, null, 2) : '';
      return { role: obj.role || 'unknown', content, calls, name: obj.name || obj.tool_call_id || '' };
    } catch {
      return { role: 'unparsed', content: line, calls: '', name: '' };
    }
  });
}

/** Content-Range "bytes 0-99/1234" → {start, end, total}. */
export function contentRange(header) {
  const m = /bytes (\d+)-(\d+)\/(\d+|\*)/.exec(header || '');
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
}
