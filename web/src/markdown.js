// Model text as safe HTML: marked renders Markdown, DOMPurify removes anything executable
// (script, event handlers, javascript: links, raw HTML the model or a tool put in its answer).
// Fenced code in a known language is highlighted (speed-highlight, loaded on first need: ./highlight.js)
// before sanitising, so what it produces is sanitised like the rest.
import DOMPurify from 'dompurify';
import { marked } from 'marked';

let highlighter = null; // ./highlight.js once loaded
let loading = null;

marked.setOptions({ gfm: true, breaks: true });
marked.use({
  renderer: {
    code(token) {
      const name = highlighter && highlighter.language(token.lang);
      if (!name) return false; // marked's own rendering: escaped text
      const body = highlighter.highlight(token.text.replace(/\n$/, ''), name);
      return `<pre><code class="language-${name}">${body}\n</code></pre>\n`;
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    const href = node.getAttribute('href') || '';
    if (!href.startsWith('#')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  }
});

/** Whether `text` has a fenced code block (which the highlighter may colour). */
export const hasFencedCode = (text) => /(^|\n) {0,3}(```|~~~)/.test(String(text ?? ''));

export const highlighterReady = () => highlighter !== null;

/** Load the highlighter once; resolves when renderMarkdown colours code. */
export function loadHighlighter() {
  if (!loading) {
    loading = import('./highlight.js').then((m) => { highlighter = m; return m; });
    loading.catch(() => { loading = null; }); // a failed load (offline) may be retried
  }
  return loading;
}

export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ''), { async: false });
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'img'],
    FORBID_ATTR: ['style'],
  });
}
