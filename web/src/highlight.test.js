import { describe, expect, it } from 'vitest';
import { highlight, language } from './highlight.js';

describe('highlight', () => {
  it('knows the languages of an operator and their aliases, and no others', () => {
    expect(['bash', 'sh', 'shell', 'python', 'py', 'json', 'yaml', 'yml', 'js', 'diff', 'patch', 'sql', 'psql']
      .map(language)).toEqual(['bash', 'sh', 'shell', 'python', 'py', 'json', 'yaml', 'yml', 'js', 'diff', 'patch', 'sql', 'psql']);
    expect(language('python title="x.py"')).toBe('python');
    expect([language(''), language('brainfuck'), language(undefined)]).toEqual([null, null, null]);
  });

  it('colours with class names only and escapes the text', () => {
    const html = highlight('echo "<img src=x onerror=alert(1)>" && rm -rf /tmp/x # done', 'bash');
    expect(html).toContain('<span class="hljs-built_in">echo</span>');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toMatch(/<img|style=/);
    expect(highlight('+added\n-removed', 'diff')).toContain('hljs-addition');
  });
});
