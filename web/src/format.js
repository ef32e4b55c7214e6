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

const UNITS = [['day', 86400], ['h', 3600], ['min', 60]];

/** "just now", "3 min ago", "in 2 h", "yesterday", "5 days ago"; past a week the date ("12 Mar 2026"). */
export function ago(iso, now = Date.now()) {
  if (!iso) return '';
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const s = Math.round((now - t) / 1000);
  const a = Math.abs(s);
  if (a < 45) return s >= 0 ? 'just now' : 'in a few seconds';
  if (a >= 7 * 86400) return new Date(t).toLocaleDateString('en-GB', { day: 'numeric', month: 'short', year: 'numeric' });
  const [unit, size] = UNITS.find(([, n]) => a >= n * 0.9) || UNITS[2];
  const n = Math.max(1, Math.round(a / size));
  if (unit === 'day' && n === 1) return s >= 0 ? 'yesterday' : 'tomorrow';
  const text = `${n} ${unit}${unit === 'day' && n > 1 ? 's' : ''}`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}

/** USD as people read money: "$12.40", "$0.13", "$0.004", "< $0.001", "$0.00" (never "$0.0000").
 *  Under a dollar two significant digits (at least two decimals); `coarse` floors to "< $0.01". */
export function usd(v, { coarse = false } = {}) {
  if (v === null || v === undefined || v === '') return '';
  const x = Number(v);
  if (!Number.isFinite(x)) return '';
  const sign = x < 0 ? '-' : '';
  const a = Math.abs(x);
  if (a === 0) return '$0.00';
  if (coarse && a < 0.01) return `${sign ? '> -' : '< '}$0.01`;
  if (a < 0.001) return `${sign ? '> -' : '< '}$0.001`;
  if (a >= 1) return `${sign}$${a.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  const digits = Math.min(4, Math.max(2, 1 - Math.floor(Math.log10(a))));
  const text = a.toFixed(digits).replace(/(\.\d\d\d*?)0+$/, '$1');
  return `${sign}$${text}`;
}

/** The change from `before` to `now` as words: "up 12%", "down 40%", "no change", "new" (nothing before). */
export function change(now, before) {
  if (before === null || before === undefined) return '';
  if (!before) return now ? 'new' : 'no change';
  const pct = Math.round(((now - before) / before) * 100);
  if (pct === 0) return 'no change';
  return pct > 0 ? `up ${pct}%` : `down ${-pct}%`;
}

/** Tokens short: 950, "12.3k", "4.1M". */
export function compact(n) {
  if (n === null || n === undefined) return '';
  const a = Math.abs(n);
  if (a >= 1e6) return `${(n / 1e6).toFixed(a >= 1e7 ? 0 : 1)}M`;
  if (a >= 1e3) return `${(n / 1e3).toFixed(a >= 1e4 ? 0 : 1)}k`;
  return String(n);
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
