// The page's limits, each the server's: one place for the page to read them.
// tests/browser/test_chat_layout.py fails when the server's limit and its copy here differ.

/** Characters in one utterance: the route, quick and supervisor endpoints refuse more (UTTERANCE_CHARS
 * in zerg.api.routes.jarvis). */
export const UTTERANCE_CHARS = 4000;

/** UTF-8 bytes of a run's task: POST /api/jarvis/supervisor refuses more with 413 (ZERG_TASK_MAX_BYTES,
 * default 8,192). 4,000 characters of three-byte text (CJK) are 12,000 bytes: the page checks both. */
export const TASK_BYTES = 8192;

const encoder = new TextEncoder();
/** UTF-8 bytes of `text`, as the server counts them. */
export const utf8Bytes = (text) => encoder.encode(text).length;

/** Whether the composer shows its counter: within a tenth of the limit. */
export const nearLimit = (length, limit = UTTERANCE_CHARS) => length >= limit * 0.9;

/** The composer's counter line ('' far from both limits) and whether the text is over one of them. */
export function measure(text) {
  const chars = text.length;
  const bytes = utf8Bytes(text);
  const fmt = (n) => n.toLocaleString('en');
  const over = bytes > TASK_BYTES;
  // Bytes only speak when they are the nearer limit (text of many multi-byte characters).
  if (bytes / TASK_BYTES > chars / UTTERANCE_CHARS && nearLimit(bytes, TASK_BYTES)) {
    return { over, atLimit: over || chars >= UTTERANCE_CHARS,
      line: over ? `Too long: ${fmt(bytes)} / ${fmt(TASK_BYTES)} bytes; shorten it to send`
        : `${fmt(bytes)} / ${fmt(TASK_BYTES)} bytes` };
  }
  return { over, atLimit: chars >= UTTERANCE_CHARS,
    line: nearLimit(chars) ? `${fmt(chars)} / ${fmt(UTTERANCE_CHARS)} characters` : '' };
}
