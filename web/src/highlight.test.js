import { describe, expect, it } from 'vitest';
import { highlight, language } from './highlight.js';

describe('highlight', () => {
  it('knows the languages of an operator and their aliases, and no others', () => {
    const names = ['bash', 'sh', 'shell', 'python', 'py', 'json', 'yaml', 'yml', 'js', 'diff', 'patch', 'sql', 'psql'];
    expect(names.map(language)).toEqual(names);
    expect(language('Python title="x.py"')).toBe('python');
    expect([language(''), language('brainfuck'), language(undefined), language('constructor')]).toEqual([null, null, null, null]);
  });

  it('colours with class names only and escapes the text', () => {
    const html = highlight('echo "<img src=x onerror=alert(1)>" && rm -rf /tmp/x # done', 'bash');
    expect(html).toContain('<span class="tok-cmnt"># done</span>');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toMatch(/<img|style=|<script/);
    expect(highlight('import shutil', 'python')).toContain('<span class="tok-kwd">import</span>');
    expect(highlight('+added\n-removed', 'diff')).toMatch(/tok-insert.*tok-deleted/s);
    expect(highlight('SELECT 1 FROM runs', 'sql')).toContain('tok-kwd');
  });

  it('gives back exactly the code, only coloured', () => {
    const code = 'const re = /a+b/g; // TODO: more\nfetch(`/x/${id}`) && "q\'s"';
    const text = highlight(code, 'js').replace(/<[^>]+>/g, '').replace(/&lt;|&gt;|&amp;|&quot;|&#39;/g,
      (e) => ({ '&lt;': '<', '&gt;': '>', '&amp;': '&', '&quot;': '"', '&#39;': "'" })[e]);
    expect(text).toBe(code);
  });
});
