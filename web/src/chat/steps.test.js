import { describe, expect, it } from 'vitest';
import { clock, cost, doing, heading, phrase, seconds } from './steps.js';

const run = (over) => ({ active: true, startedAt: 1000, order: [], workers: {}, ...over });

describe('a turn\'s progress in words', () => {
  it('says what a worker does from its task', () => {
    expect(doing('Check disk on cube')).toBe('Checking disk on cube…');
    expect(doing('run df -h on cube')).toBe('Running df -h on cube…');
    expect(doing('Compare the two logs.')).toBe('Comparing the two logs…');
    expect(doing('Disk usage on cube')).toBe('Disk usage on cube…');
    expect(doing('')).toBe('Working…');
  });
  it('never shows internals', () => {
    expect(phrase(run({ thinking: 'Using spawn_worker...' }))).toBe('Planning what to check…');
    expect(phrase(run({ thinking: 'Reviewing results from 2 worker(s)...' }))).toBe('Reviewing results from 2 worker(s)…');
    const two = run({ order: [1, 2], workers: { 1: { status: 'running', task: 'Check disk' }, 2: { status: 'running', task: 'Check memory' } } });
    expect(phrase(two)).toBe('Checking disk… (+1 more)');
    expect(phrase(run({ order: [1], workers: { 1: { status: 'success', task: 'x' } } }))).toBe('Writing the answer…');
  });
  it('heads the block live, then as a summary', () => {
    const live = run({ order: [1, 2, 3], workers: {} });
    expect(heading(live, 15000)).toBe('Working · 3 workers · 0:14');
    expect(heading({ ...live, active: false, durationMs: 2400, costUsd: 0.004 }, 0)).toBe('Used 3 workers · 2.4 s · $0.004');
    expect(heading(run({ active: false, order: [1], durationMs: 800, costUsd: 0 }), 0)).toBe('Used 1 worker · 0.8 s');
    expect(heading(run({ active: false, status: 'interrupted', order: [1, 2] }), 0)).toBe('Interrupted · 2 workers');
  });
  it('formats clocks, seconds and small costs', () => {
    expect(clock(3723000)).toBe('1:02:03');
    expect(seconds(65000)).toBe('1 min 5 s');
    expect(cost(0.0004)).toBe('< $0.001');
    expect(cost(0.123)).toBe('$0.12');
    expect(cost(null)).toBe('');
  });
});
