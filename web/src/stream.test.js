import { describe, expect, it } from 'vitest';
import { backoffDelay, follow, withLastEventId } from './stream.js';

class FakeSource {
  static last = null;
  constructor(url) { this.url = url; this.listeners = {}; this.readyState = 0; FakeSource.last = this; FakeSource.all.push(this); }
  addEventListener(t, fn) { this.listeners[t] = fn; }
  emit(t, id, data) { this.listeners[t]({ lastEventId: String(id), data: JSON.stringify(data) }); }
  close() { this.readyState = 2; this.closedByUs = true; }
}
FakeSource.all = [];

describe('follow', () => {
  it('delivers each event id once, also when replayed from the start', () => {
    const got = [];
    const seen = new Set();
    follow('/s?run_id=1', { EventSourceImpl: FakeSource, seen, onEvent: (t, p, id) => got.push(id) });
    FakeSource.last.emit('worker_spawned', 3, { job_id: 1 });
    FakeSource.last.emit('worker_spawned', 3, { job_id: 1 });
    follow('/s?run_id=1', { EventSourceImpl: FakeSource, seen, onEvent: (t, p, id) => got.push(id) });
    FakeSource.last.emit('worker_spawned', 3, { job_id: 1 });
    FakeSource.last.emit('worker_started', 4, { job_id: 1 });
    expect(got).toEqual([3, 4]);
  });

  it('closes for good on the terminal event', () => {
    const states = [];
    follow('/s?run_id=1', { EventSourceImpl: FakeSource, onEvent: () => {}, onState: (s) => states.push(s) });
    const src = FakeSource.last;
    src.emit('supervisor_complete', 9, { result: 'ok' });
    expect(src.closedByUs).toBe(true);
    expect(states.at(-1)).toBe('closed');
  });

  it('reconnects with backoff and last_event_id once EventSource gives up', async () => {
    const timers = [];
    follow('/s?run_id=1', { EventSourceImpl: FakeSource, onEvent: () => {}, setTimer: (fn, ms) => timers.push([fn, ms]) });
    const first = FakeSource.last;
    first.emit('worker_spawned', 7, {});
    first.readyState = 2;
    first.onerror();
    expect(timers[0][1]).toBe(5000);
    await timers[0][0]();
    expect(FakeSource.last).not.toBe(first);
    expect(FakeSource.last.url).toBe('/s?run_id=1&last_event_id=7');
    FakeSource.last.readyState = 2;
    FakeSource.last.onerror();
    expect(timers[1][1]).toBe(10000);
  });
});

describe('helpers', () => {
  it('backs off from 5 s to at most a minute', () => {
    expect([0, 1, 2, 10].map(backoffDelay)).toEqual([5000, 10000, 20000, 60000]);
  });
  it('replaces an earlier last_event_id', () => {
    expect(withLastEventId('/e?run_id=1&last_event_id=3', 9)).toBe('/e?run_id=1&last_event_id=9');
    expect(withLastEventId('/e', 2)).toBe('/e?last_event_id=2');
  });
});
