// A long thread as pages: the messages of each page loaded from the thread ("Load older messages")
// together, then the rest (the latest page and the turns of this visit) PAGE at a time. Each page is
// one element of the log: it renders again only when one of its messages (or their runs) changed, and
// the browser skips the layout and paint of a page off screen (content-visibility in style.css), so
// neither scrolling nor loading an earlier page costs more as the thread grows.

/** `messages` in order, as [{key, items}]: runs of the same `page` tag, untagged ones `size` at a time.
 * A page's key is its tag, or the key of its first message (stable as messages are appended). */
export function logPages(messages, size) {
  const pages = [];
  let current = null;
  for (const m of messages) {
    const tag = m.page || null;
    if (!current || current.tag !== tag || (!tag && current.items.length >= size)) {
      current = { key: tag ? `page-${tag}` : `from-${m.key}`, tag, items: [] };
      pages.push(current);
    }
    current.items.push(m);
  }
  return pages.map(({ key, items }) => ({ key, items }));
}

/** Two renderings of a page are the same when they show the same messages with the same runs. */
export function samePage(a, b) {
  return a.acts === b.acts && a.items.length === b.items.length
    && a.items.every((m, i) => m === b.items[i] && a.runs[i] === b.runs[i]);
}
