// The supervisor's answer as it is written: `answer_delta` events ({offset, text, reset?}, docs/runs.md)
// folded into a draft message, which the run's final answer (supervisor_complete) then replaces.
//
// - `offset` counts the Unicode code points before the event's text: an event whose offset is behind
//   the draft was applied already (nothing twice), one ahead of it means events were missed: the draft
//   stops there and waits for the final answer, which is always whole.
// - `reset: true` starts the draft again (a new model call, a retried one); an empty reset withdraws it
//   (the model went on to call tools): the draft message goes.
// - A run whose answer is on the page already (the stored thread, after a reload) gets no draft.

export const EMPTY = Object.freeze({ text: '', next: 0, gap: false });

/** Code points of `s` (the server's offsets count them, not UTF-16 units). */
export function codePoints(s) {
  return [...s].length;
}

/** The draft after one answer_delta payload. */
export function applyDelta(draft, p) {
  let d = p && p.reset ? EMPTY : (draft || EMPTY);
  if (!p || typeof p.text !== 'string' || typeof p.offset !== 'number') return d;
  if (d.gap) return d;
  if (p.offset < d.next) return d; // seen already
  if (p.offset > d.next) return { ...d, gap: true }; // events missed: the final answer will say it all
  return { text: d.text + p.text, next: d.next + codePoints(p.text), gap: false };
}

export const draftKey = (runId) => `run-${runId}`;

/** The run's assistant message in `messages` (its turn: made empty when the run starts, or its stored
 * answer after a reload), or -1. */
const turnOf = (messages, runId) => messages.findIndex((m) => m.key === draftKey(runId) || (m.role === 'assistant' && m.runId === runId));

/** A message without its draft's fields. */
const settled = ({ streaming, draft, ...m }) => m;

/** `messages` with the run's draft updated by one answer_delta payload: the text goes into the run's
 * turn (added when the page has none yet). */
export function withDelta(messages, runId, p) {
  const at = turnOf(messages, runId);
  const current = at >= 0 ? messages[at] : null;
  if (current && current.content && !current.streaming) return messages; // the answer is here already
  const draft = applyDelta(current && current.streaming ? current.draft : EMPTY, p);
  let next;
  if (draft.text) {
    next = { ...(current || { key: draftKey(runId), role: 'assistant', runId, jobIds: [] }), content: draft.text, streaming: true, draft };
  } else if (current && current.streaming) next = { ...settled(current), content: '' }; // withdrawn: the turn stays
  else return messages; // nothing yet
  if (at < 0) return [...messages, next];
  const copy = [...messages];
  copy[at] = next;
  return copy;
}

/** `messages` with the run's final `answer`: it replaces the draft or fills the empty turn, or joins the
 * list, unless the run's answer is on the page already. */
export function withFinalAnswer(messages, answer) {
  const at = turnOf(messages, answer.runId);
  if (at < 0) return [...messages, answer];
  if (messages[at].content && !messages[at].streaming) return messages;
  const copy = [...messages];
  copy[at] = { ...settled(messages[at]), content: answer.content, jobIds: answer.jobIds || messages[at].jobIds };
  return copy;
}

/** `messages` with the run's draft emptied (the run failed or was cancelled: a draft is never its
 * answer; the turn stays for its steps and how it ended). */
export function withoutDraft(messages, runId) {
  if (!messages.some((m) => m.streaming && m.runId === runId)) return messages;
  return messages.map((m) => (m.streaming && m.runId === runId ? { ...settled(m), content: '' } : m));
}
