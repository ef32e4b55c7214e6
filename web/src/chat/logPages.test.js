import { describe, expect, it } from 'vitest';
import { logPages, samePage } from './logPages.js';

const msg = (key, page) => ({ key, ...(page ? { page } : {}) });

describe('logPages', () => {
  it('keeps each loaded page together and cuts the rest into pages of `size`', () => {
    const ms = [msg('a', 7), msg('b', 7), msg('c', 9), msg('d'), msg('e'), msg('f'), msg('g'), msg('h')];
    const pages = logPages(ms, 2);
    expect(pages.map((p) => p.key)).toEqual(['page-7', 'page-9', 'from-d', 'from-f', 'from-h']);
    expect(pages.map((p) => p.items.map((m) => m.key).join(''))).toEqual(['ab', 'c', 'de', 'fg', 'h']);
    expect(logPages([], 2)).toEqual([]);
  });

  it('keeps the keys of the pages already shown when messages are appended or an earlier page comes', () => {
    const ms = [msg('d'), msg('e'), msg('f')];
    const before = logPages(ms, 2).map((p) => p.key);
    const after = logPages([msg('a', 3), ...ms, msg('g')], 2).map((p) => p.key);
    expect(after).toEqual(['page-3', ...before]);
  });
});

describe('samePage', () => {
  const acts = {};
  const a = msg('a');
  const b = msg('b');
  const run = { runId: 1 };

  it('is the same page when it shows the same messages with the same runs', () => {
    expect(samePage({ items: [a, b], runs: [null, run], acts }, { items: [a, b], runs: [null, run], acts })).toBe(true);
  });

  it('differs when a message, its run, the count or the callbacks changed', () => {
    const base = { items: [a, b], runs: [null, run], acts };
    expect(samePage(base, { ...base, items: [a, { ...b }] })).toBe(false);
    expect(samePage(base, { ...base, runs: [null, { ...run }] })).toBe(false);
    expect(samePage(base, { ...base, items: [a], runs: [null] })).toBe(false);
    expect(samePage(base, { ...base, acts: {} })).toBe(false);
  });
});
