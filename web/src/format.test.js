import { describe, expect, it } from 'vitest';
import { ago, change, compact, usd } from './format.js';

describe('usd', () => {
  it('reads like money at every size, never $0.0000', () => {
    expect(usd(12.4)).toBe('$12.40');
    expect(usd(1234.5)).toBe('$1,234.50');
    expect(usd(0.5)).toBe('$0.50');
    expect(usd(0.125)).toBe('$0.13');
    expect(usd(0.0625)).toBe('$0.063');
    expect(usd(0.004)).toBe('$0.004');
    expect(usd(0.0041)).toBe('$0.0041');
    expect(usd(0.00004)).toBe('< $0.001');
    expect(usd(0)).toBe('$0.00');
    expect(usd(null)).toBe('');
    expect(usd(0.004, { coarse: true })).toBe('< $0.01');
    expect(usd(0.25, { coarse: true })).toBe('$0.25');
    for (const v of [0.00001, 0.0001, 0.00099, 0.001, 0.009, 0.01, 0.099]) expect(usd(v)).not.toMatch(/\$0\.0000/);
  });
});

describe('ago', () => {
  const now = Date.parse('2026-03-10T12:00:00Z');
  it('says how long ago, or how soon', () => {
    expect(ago('2026-03-10T11:59:50Z', now)).toBe('just now');
    expect(ago('2026-03-10T11:57:00Z', now)).toBe('3 min ago');
    expect(ago('2026-03-10T09:00:00Z', now)).toBe('3 h ago');
    expect(ago('2026-03-09T11:00:00Z', now)).toBe('yesterday');
    expect(ago('2026-03-06T12:00:00Z', now)).toBe('4 days ago');
    expect(ago('2026-03-10T12:05:00Z', now)).toBe('in 5 min');
    expect(ago('2026-03-12T12:00:00Z', now)).toBe('in 2 days');
    expect(ago('2026-01-02T12:00:00Z', now)).toBe('2 Jan 2026');
    expect(ago(null, now)).toBe('');
  });
});

describe('change and compact', () => {
  it('says a change in words', () => {
    expect(change(1.12, 1)).toBe('up 12%');
    expect(change(0.6, 1)).toBe('down 40%');
    expect(change(1, 1)).toBe('no change');
    expect(change(3, 0)).toBe('new');
    expect(change(0, 0)).toBe('no change');
    expect(change(1, null)).toBe('');
  });
  it('shortens token counts', () => {
    expect(compact(950)).toBe('950');
    expect(compact(12345)).toBe('12k');
    expect(compact(4100)).toBe('4.1k');
    expect(compact(4_100_000)).toBe('4.1M');
  });
});
