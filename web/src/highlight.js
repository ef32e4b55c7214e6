// Syntax highlighting for code blocks in answers: speed-highlight's tokenizer (CC0, no dependencies) with
// the languages an operator's answers carry (shell, Python, JSON, YAML, JavaScript, diff, SQL), given to it
// directly so nothing else is bundled. Loaded on demand (markdown.js's loadHighlighter) the first time an
// answer has a fenced code block. Its output is escaped text in <span class="tok-…">, sanitised with the rest.
import bash from '@speed-highlight/core/languages/bash.js';
import diff from '@speed-highlight/core/languages/diff.js';
import js from '@speed-highlight/core/languages/js.js';
import jsdoc from '@speed-highlight/core/languages/jsdoc.js';
import json from '@speed-highlight/core/languages/json.js';
import py from '@speed-highlight/core/languages/py.js';
import regex from '@speed-highlight/core/languages/regex.js';
import sql from '@speed-highlight/core/languages/sql.js';
import todo from '@speed-highlight/core/languages/todo.js';
import yaml from '@speed-highlight/core/languages/yaml.js';
import { tokenizeWith } from '@speed-highlight/core/tokenize';

const NAMES = {
  bash, sh: bash, shell: bash, zsh: bash, console: bash,
  python: py, py, json, jsonc: json, yaml, yml: yaml,
  javascript: js, js, jsx: js, mjs: js, cjs: js, node: js,
  diff, patch: diff,
  sql, postgres: sql, postgresql: sql, psql: sql, mysql: sql, sqlite: sql,
};
// What the languages embed by name (comments' TODO marks, JSDoc, regular expressions, nested code).
const EMBEDDED = { js, jsdoc, py, regex, todo };
const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escape = (s) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** The language a fence's info string names (its first word, or an alias), or null. */
export function language(info) {
  const name = String(info || '').trim().split(/\s+/)[0].toLowerCase();
  return Object.hasOwn(NAMES, name) ? name : null;
}

/** `code` as highlighted HTML (escaped text in spans), for a name `language()` accepted. */
export function highlight(code, name) {
  let html = '';
  tokenizeWith(code, NAMES[name], (text, type) => {
    const kind = String(type || '').replace(/[^a-z]/g, '');
    html += kind ? `<span class="tok-${kind}">${escape(text)}</span>` : escape(text);
  }, { languages: EMBEDDED });
  return html;
}
