// Errors as sentences with a next step: what the owner reads instead of the server's raw words
// ("utterance: String should have at most 4000 characters", a pid and a hostname).
import { ApiError } from '../api.js';
import { TASK_BYTES } from '../limits.js';

const fmt = (n) => Number(n).toLocaleString('en');

/** A request that failed (ApiError, the network, anything thrown), as one sentence with a next step. */
export function sentence(err) {
  if (!err) return '';
  if (!(err instanceof ApiError)) return `Something went wrong in the page (${err.message || err}). Try again.`;
  const msg = err.message || '';
  if (err.status === 0) return 'Jarvis cannot be reached. Check your connection, then try again.';
  if (err.status === 401) return 'Your session has ended. Sign in again.';
  const chars = /at most (\d+) characters/.exec(msg);
  if ((err.status === 400 || err.status === 422) && chars) {
    return `Your message is too long: at most ${fmt(chars[1])} characters. Shorten it and send it again.`;
  }
  if (err.status === 413) {
    const limit = /limit is (\d+)/.exec(msg);
    return `Your message is too long for a run: at most ${fmt(limit ? limit[1] : TASK_BYTES)} bytes of text. `
      + 'Shorten it and send it again.';
  }
  if ((err.status === 400 || err.status === 422) && /blank/.test(msg)) return 'Type a message first.';
  if (err.status === 429) return `${capital(msg)} Try again later.`;
  if (err.status === 503) return `Jarvis cannot do that right now: ${msg.replace(/[.;]?\s*(try again)?\.?$/i, '')}. Try again in a moment.`;
  if (err.status >= 500) return 'Jarvis hit an internal error. Try again; if it happens again, look at the server log.';
  return `${capital(msg)}${/[.!?]$/.test(msg) ? '' : '.'}`;
}

const capital = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);

/** How a run that did not answer ended, as one line; `message` is the run's own error text. */
export function runEnding(status, message = '') {
  if (status === 'cancelled') return 'You cancelled this run.';
  if (status === 'interrupted') return 'This run was interrupted: the process running it stopped before it answered.';
  if (status === 'timeout') return 'This run reached its time limit before it could finish.';
  const why = plainReason(message.replace(/^(run )?failed:\s*/i, ''));
  if (MODEL.test(message)) return `This run failed: ${why}. Run it again; if it keeps failing, check the model in Dashboard › Agents.`;
  return why ? `This run failed: ${why}${/[.!?]$/.test(why) ? '' : '.'}` : 'This run failed.';
}

const MODEL = /model (\S+) at \S+ answered HTTP (\d+)(?::\s*(?:Error code: \d+ - )?(.*))?/s;

/** A run's or a worker's error as plain words: a model's failure without its endpoint's URL, no
 * exception class name ("LLMError: …"), at most 300 characters. */
export function plainReason(message = '') {
  const model = MODEL.exec(message);
  if (model) {
    const detail = (model[3] || '').trim().replace(/[.]$/, '').slice(0, 200);
    return `the model ${model[1]} could not answer (HTTP ${model[2]}${detail ? `: ${detail}` : ''})`;
  }
  return message.replace(/^[A-Z]\w*(Error|Exception):\s*/, '').trim().slice(0, 300);
}

/** Whether a worker's error only repeats its run's ending (a job cancelled with the run's reason). */
export const repeatsRun = (workerError, runError) => !!workerError && !!runError && workerError === runError;

