// An answer's text as the page shows it: sanitised markdown (markdown.js), code blocks highlighted once
// the highlighter has loaded, a bar over each code block with its language and a Copy button, and
// "Copy answer" under a finished answer. While the answer streams (a draft from answer_delta events,
// chat/answerStream.js) the same rendering runs on each update, without the answer's Copy.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { hasFencedCode, highlighterReady, loadHighlighter, renderMarkdown } from '../markdown.js';

/** Put `text` on the clipboard; resolves true when it got there. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No async clipboard (an insecure origin): a selected textarea and the old command.
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'sr-only';
    document.body.appendChild(area);
    area.select();
    let done = false;
    try { done = document.execCommand('copy'); } catch { done = false; }
    area.remove();
    return done;
  }
}

/** A bar before every <pre> inside `root` (once each): the language, a Copy button. */
function addCodeBars(root) {
  if (!root) return;
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.previousElementSibling && pre.previousElementSibling.classList.contains('code-bar')) continue;
    const bar = document.createElement('div');
    bar.className = 'code-bar';
    const lang = /language-(\S+)/.exec(pre.querySelector('code')?.className || '');
    const label = document.createElement('span');
    label.textContent = lang ? lang[1] : 'code';
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-code secondary';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', `Copy ${lang ? lang[1] : ''} code`.replace('  ', ' '));
    bar.append(label, button);
    pre.before(bar);
  }
}

const flash = (button, words) => {
  button.textContent = words;
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
};

export function Answer({ text, streaming = false }) {
  const ref = useRef(null);
  const [, setColoured] = useState(highlighterReady());
  const [copied, setCopied] = useState('');
  const code = hasFencedCode(text);
  useEffect(() => {
    if (code && !highlighterReady()) loadHighlighter().then(() => setColoured(true)).catch(() => {});
  }, [code]);
  const html = renderMarkdown(text);
  useLayoutEffect(() => addCodeBars(ref.current));

  const onClick = async (e) => {
    const button = e.target.closest && e.target.closest('button.copy-code');
    if (!button) return;
    const pre = button.parentElement.nextElementSibling;
    const done = await copyText(pre ? pre.textContent.replace(/\n$/, '') : '');
    flash(button, done ? 'Copied' : 'Copy failed');
  };
  const copyAll = async () => {
    setCopied((await copyText(text)) ? 'Copied' : 'Copy failed');
    setTimeout(() => setCopied(''), 1500);
  };

  return (
    <>
      <div class="md" ref={ref} onClick={onClick} aria-busy={streaming ? 'true' : undefined}
        data-streaming={streaming ? 'true' : undefined} dangerouslySetInnerHTML={{ __html: html }} />
      {!streaming && text && (
        <p class="answer-tools">
          <button type="button" class="link copy-answer" onClick={copyAll}>{copied || 'Copy answer'}</button>
        </p>
      )}
    </>
  );
}
