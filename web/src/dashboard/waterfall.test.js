import { describe, expect, it } from 'vitest';
import { fromEvents, kindOf, labelOf, layout, timeline } from './waterfall.js';

const T = (s) => new Date(Date.UTC(2026, 10, 29, 8, 0, 0) + s * 1000).toISOString();
const ev = (id, s, type, payload = {}) => ({ id, created_at: T(s), event_type: type, payload });

const run = {
  run_id: 7, status: 'success', task: 'check disk and memory', trigger: 'api', tokens_in: 900, tokens_out: 90, cost_usd: 0.004,
  workers: [
    { job_id: 1, title: 'Check disk usage', task: 'Check disk usage', status: 'success', summary: 'disk 78%', error: null,
      command: 'df -h', usage: { tokens_in: 300, tokens_out: 30, cost_usd: 0.001 },
      tool_calls: [{ path: 'tool_calls/001_container_exec.txt', tool: 'container_exec', ok: true, command: 'df -h', started_at: T(2), duration_ms: 500 }] },
    { job_id: 2, title: 'Check memory', task: 'Check memory', status: 'failed', summary: null, error: 'boom',
      command: null, usage: { tokens_in: 200, tokens_out: 20, cost_usd: 0.001 }, tool_calls: [] },
  ],
};
const events = [
  ev(1, 0, 'supervisor_started', { task: 'check disk and memory' }),
  ev(2, 1, 'worker_spawned', { job_id: 1, task: 'Check disk usage' }),
  ev(3, 1, 'worker_spawned', { job_id: 2, task: 'Check memory' }),
  ev(4, 1.5, 'worker_started', { job_id: 1 }),
  ev(5, 3, 'worker_complete', { job_id: 1, status: 'success', duration_ms: 1500 }),
  ev(6, 4, 'worker_complete', { job_id: 2, status: 'failed' }),
  ev(7, 4.5, 'worker_summary_ready', { job_id: 1, summary: 'disk 78%' }),
  ev(8, 6, 'supervisor_complete', { result: 'Disk is 78% full.' }),
];

describe('the waterfall from a run\'s events', () => {
  const [root] = fromEvents(run, events);
  it('puts the supervisor\'s turns and one bar per worker under the run', () => {
    expect(root.kind).toBe('run');
    expect(root.duration_ms).toBe(6000);
    expect(root.children.map((c) => c.label)).toEqual(['Supervisor · plan', 'Check disk usage', 'Check memory', 'Supervisor · answer']);
    expect(root.children.filter((c) => c.kind === 'worker')).toHaveLength(2);
    const [plan, disk, memory, answer] = root.children;
    expect(plan.duration_ms).toBe(1000);
    expect([disk.duration_ms, disk.status, disk.tokens_in, disk.cost_usd]).toEqual([2000, 'ok', 300, 0.001]);
    expect([memory.status, memory.status_message]).toEqual(['error', 'boom']);
    expect([answer.start, answer.duration_ms]).toEqual([T(4.5), 1500]); // from the last summary to the answer
  });
  it('nests each worker\'s tool calls and summary under it, in time order', () => {
    const disk = root.children[1];
    expect(disk.children.map((c) => [c.kind, c.label, c.duration_ms])).toEqual([
      ['tool', 'container_exec · df -h', 500], ['step', 'Summary', 1500]]);
  });
  it('keeps a running run open until now', () => {
    const going = { ...run, status: 'running', workers: [{ ...run.workers[0], status: 'running', tool_calls: [] }] };
    const [r] = fromEvents(going, events.slice(0, 4), Date.parse(T(10)));
    expect([r.status, r.duration_ms]).toEqual(['running', 10000]);
    expect(r.children.map((c) => c.kind)).toEqual(['supervisor', 'worker']); // no answering turn yet
    expect(r.children[1].duration_ms).toBe(9000);
  });
});

describe('the waterfall from spans', () => {
  const span = (name, operation, attributes = {}) => ({ name, operation, kind: 'internal', attributes, children: [] });
  it('names each span for a person', () => {
    expect(kindOf(span('invoke_workflow zerg.run', 'invoke_workflow'))).toBe('run');
    expect(labelOf(span('invoke_agent supervisor', 'invoke_agent', { 'zerg.action': 'plan' }))).toBe('Supervisor · plan');
    expect(labelOf(span('invoke_agent worker', 'invoke_agent', { 'zerg.job.id': 4, 'zerg.action': 'run' }), { 4: 'Check disk' })).toBe('Check disk');
    expect(labelOf(span('chat gpt-4o', 'chat', { 'gen_ai.request.model': 'gpt-4o' }))).toBe('Model call · gpt-4o');
    expect(labelOf(span('execute_tool ssh_exec', 'execute_tool', { 'gen_ai.tool.name': 'ssh_exec' }))).toBe('Tool · ssh_exec');
    expect(kindOf(span('approval_wait', undefined))).toBe('step');
  });
  it('lays bars out as shares of the whole', () => {
    const a = { start: T(0), duration_ms: 4000, children: [{ start: T(1), duration_ms: 1000, children: [] }] };
    const { place, total } = layout([a]);
    expect(total).toBe(4000);
    expect(place(a)).toEqual({ left: 0, width: 100 });
    expect(place(a.children[0])).toEqual({ left: 25, width: 25 });
  });
});

describe('timeline', () => {
  it('folds a streamed answer into one row and keeps the time since the event before', () => {
    const evs = [ev(1, 0, 'supervisor_started'), ev(2, 1, 'answer_delta'), ev(3, 1.1, 'answer_delta'),
      ev(4, 1.2, 'answer_delta'), ev(5, 2, 'supervisor_complete')];
    const rows = timeline(evs);
    expect(rows.map((r) => [r.e.id, r.n, r.prev && r.prev.id])).toEqual([[1, 1, null], [2, 3, 1], [5, 1, 4]]);
  });
});
