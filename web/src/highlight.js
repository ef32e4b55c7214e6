// Syntax highlighting for code blocks in answers: highlight.js's core with the languages an operator's
// answers carry (shell, Python, JSON, YAML, JavaScript, diff, SQL). Loaded on demand (markdown.js's
// loadHighlighter) the first time an answer has a fenced code block, so the first paint never pays for it.
// Its output is escaped text in <span class="hljs-…">, and goes through DOMPurify with the rest.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import diff from 'highlight.js/lib/languages/diff';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import yaml from 'highlight.js/lib/languages/yaml';

for (const [name, lang] of Object.entries({ bash, diff, javascript, json, python, shell, sql, yaml })) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(['sh', 'zsh', 'console-script'], { languageName: 'bash' });
hljs.registerAliases(['jsonc', 'json5'], { languageName: 'json' });
hljs.registerAliases(['postgres', 'postgresql', 'psql', 'mysql', 'sqlite'], { languageName: 'sql' });

/** The registered language a fence's info string names (its first word, any alias), or null. */
export function language(info) {
  const name = String(info || '').trim().split(/\s+/)[0].toLowerCase();
  return name && hljs.getLanguage(name) ? name : null;
}

/** `code` as highlighted HTML (escaped text in spans), for a language `language()` accepted. */
export function highlight(code, name) {
  return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
}
