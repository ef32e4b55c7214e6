// The page's limits, each the server's (zerg.api.routes.jarvis): one place for the page to read them.
// tests/browser/test_chat_layout.py fails when the server's limit and its copy here differ.

/** Characters in one utterance: the route, quick and supervisor endpoints refuse more. */
export const UTTERANCE_CHARS = 4000;

/** Whether the composer shows its counter: within a tenth of the limit. */
export const nearLimit = (length, limit = UTTERANCE_CHARS) => length >= limit * 0.9;
