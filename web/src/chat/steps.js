// Pure helpers of a turn's progress block: what a worker is doing in words, the clock, the summary line.

// Imperative verbs a worker's task (written by the supervisor) usually starts with.
const VERBS = new Set(['analyse', 'analyze', 'audit', 'check', 'collect', 'compare', 'count', 'diagnose', 'download',
  'examine', 'fetch', 'find', 'gather', 'get', 'grep', 'identify', 'inspect', 'investigate', 'list', 'look', 'measure',
  'monitor', 'ping', 'query', 'read', 'restart', 'review', 'run', 'scan', 'search', 'show', 'summarise', 'summarize',
  'test', 'trace', 'verify', 'write']);
const DOUBLE = new Set(['get', 'run', 'stop', 'scan']);

/** "Check disk on cube" -> "Checking disk on cube…"; a task that starts otherwise is shown as it is. */
export function doing(task) {
  const text = (task || '').trim().replace(/\s+/g, ' ').replace(/[.…]+$/, '');
  if (!text) return 'Working…';
  const [first, ...rest] = text.split(' ');
  const verb = first.toLowerCase();
  if (!VERBS.has(verb)) return `${text}…`;
  let ing = `${verb}ing`;
  if (DOUBLE.has(verb)) ing = `${verb}${verb.at(-1)}ing`;
  else if (verb.endsWith('e') && !verb.endsWith('ee')) ing = `${verb.slice(0, -1)}ing`;
  return [ing[0].toUpperCase() + ing.slice(1), ...rest].join(' ') + '…';
}

/** Elapsed time as a clock: 0:14, 2:05, 1:02:03. */
export function clock(ms) {
  const s = Math.max(0, Math.floor((ms || 0) / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** Seconds for the summary line: "2.4 s", "1 min 5 s". */
export function seconds(ms) {
  if (ms == null) return '';
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms - m * 60000) / 1000)} s`;
}

/** USD with the precision a small amount needs: "$0.004", "$0.12", "< $0.001"; '' when unknown or zero. */
export function cost(usd) {
  if (usd == null || !(usd > 0)) return '';
  if (usd < 0.001) return '< $0.001';
  if (usd < 0.01) return `$${usd.toFixed(3)}`;
  return `$${usd.toFixed(2)}`;
}

const workersWord = (n) => `${n} worker${n === 1 ? '' : 's'}`;

/** The block's heading: live ("Working · 3 workers · 0:14") or once the run ended
 * ("Used 3 workers · 2.4 s · $0.004"). */
export function heading(run, now) {
  const n = run.order.length;
  if (run.active) {
    const since = run.startedAt ? now - run.startedAt : 0;
    return ['Working', n ? workersWord(n) : '', clock(since)].filter(Boolean).join(' · ');
  }
  const ended = { cancelled: 'Cancelled', interrupted: 'Interrupted', failed: 'Failed', timeout: 'Timed out' }[run.status];
  const head = ended ? [ended, n ? workersWord(n) : ''].filter(Boolean).join(' · ') : n ? `Used ${workersWord(n)}` : 'No workers';
  return [head, seconds(run.durationMs), cost(run.costUsd)].filter(Boolean).join(' · ');
}

/** What the run is doing now, in words: the running workers' tasks, else the supervisor's step. */
export function phrase(run) {
  const workers = run.order.map((id) => run.workers[id]);
  const running = workers.filter((w) => w.status === 'running' || w.status === 'spawned' || w.status === 'queued');
  if (running.length) return doing(running[0].task) + (running.length > 1 ? ` (+${running.length - 1} more)` : '');
  if (workers.length) return 'Writing the answer…';
  // The supervisor's own words, unless they name an internal tool ("Using spawn_worker...").
  if (run.thinking && !/^Using \w+/.test(run.thinking)) return run.thinking.replace(/\.\.\.$/, '…');
  return 'Planning what to check…';
}
