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

/** `messages` with the run's draft message updated by one answer_delta payload. */
export function withDelta(messages, runId, p) {
  const key = draftKey(runId);
  const at = messages.findIndex((m) => m.key === key || (m.role === 'assistant' && m.runId === runId));
  const current = at >= 0 ? messages[at] : null;
  if (current && !current.streaming) return messages; // the answer is here already
  const draft = applyDelta(current ? current.draft : EMPTY, p);
  if (!draft.text) return at >= 0 ? messages.filter((_, i) => i !== at) : messages; // withdrawn, or nothing yet
  const next = { key, role: 'assistant', runId, content: draft.text, streaming: true, draft, jobIds: current?.jobIds || [] };
  if (at < 0) return [...messages, next];
  const copy = [...messages];
  copy[at] = next;
  return copy;
}

/** `messages` with the run's final `answer` message: it replaces the draft, or joins the list unless
 * the run's answer is on the page already. */
export function withFinalAnswer(messages, answer) {
  const at = messages.findIndex((m) => m.key === answer.key || (m.role === 'assistant' && m.runId === answer.runId));
  if (at < 0) return [...messages, answer];
  if (!messages[at].streaming) return messages;
  const copy = [...messages];
  copy[at] = answer;
  return copy;
}

/** `messages` without the run's draft (the run failed or was cancelled: a draft is never its answer). */
export function withoutDraft(messages, runId) {
  return messages.some((m) => m.streaming && m.runId === runId) ? messages.filter((m) => !(m.streaming && m.runId === runId)) : messages;
}
