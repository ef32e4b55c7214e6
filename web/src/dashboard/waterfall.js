// A run's waterfall as rows: from its kept spans (GET /api/jarvis/runs/{id}/trace, docs/tracing.md)
// or, when it has none, built from its events and its workers' tool calls in the same shape
// {span_id, name, label, kind, start, duration_ms, status, tokens_in, tokens_out, cost_usd, payload, children}.

const ms = (iso) => (iso ? new Date(iso).getTime() : null);
const iso = (t) => new Date(t).toISOString();

/** What a span is, for its row: run, supervisor, worker, model, tool or step. */
export function kindOf(span) {
  if (span.kind && ['run', 'supervisor', 'worker', 'model', 'tool', 'step'].includes(span.kind) && !span.attributes) return span.kind;
  const op = span.operation || '';
  if (op === 'invoke_workflow') return 'run';
  if (span.name === 'invoke_agent supervisor') return 'supervisor';
  if (span.name === 'invoke_agent worker') return 'worker';
  if (op === 'chat') return 'model';
  if (op === 'execute_tool') return 'tool';
  return 'step';
}

/** A span's words for its row: the worker's task title, the supervisor's action, the tool... */
export function labelOf(span, titles = {}) {
  if (span.label) return span.label;
  const a = span.attributes || {};
  const kind = kindOf(span);
  if (kind === 'run') return `Run ${a['zerg.run.id'] ?? ''} · supervisor`.replace('  ', ' ');
  if (kind === 'supervisor') return `Supervisor · ${a['zerg.action'] || 'turn'}`;
  if (kind === 'worker') {
    const job = a['zerg.job.id'];
    const title = titles[job];
    return `${title || `Worker ${job ?? ''}`}${a['zerg.action'] && a['zerg.action'] !== 'run' ? ` · ${a['zerg.action']}` : ''}`;
  }
  if (kind === 'model') return `Model call · ${a['gen_ai.request.model'] || span.name.replace(/^chat /, '')}`;
  if (kind === 'tool') return `Tool · ${a['gen_ai.tool.name'] || span.name.replace(/^execute_tool /, '')}`;
  if (span.name === 'summarize worker') return `Summary · ${titles[a['zerg.job.id']] || `worker ${a['zerg.job.id'] ?? ''}`}`;
  if (span.name === 'approval_wait') return `Waiting for your approval · ${a['gen_ai.tool.name'] || ''}`;
  if (span.name === 'evidence_mount') return 'Evidence read';
  if (span.name === 'supervisor remember') return 'Supervisor · remember';
  return span.name;
}

function node(fields) {
  return { tokens_in: 0, tokens_out: 0, cost_usd: 0, status: 'ok', payload: null, children: [], ...fields };
}

const WORKER_STATUS = { success: 'ok', failed: 'error', timeout: 'error', cancelled: 'cancelled', running: 'running', queued: 'running' };

/** The waterfall of a run with no kept spans: the run (its supervisor) on top; under it the
 * supervisor's planning turn, each worker (its tool calls, its approval waits and its summary under
 * it) and the supervisor's answering turn. Times from the events; tool calls from the run document. */
export function fromEvents(run, events, now = Date.now()) {
  const evs = [...(events || [])].sort((a, b) => a.id - b.id);
  const at = (e) => ms(e.created_at);
  const first = (type, pred = () => true) => evs.find((e) => e.event_type === type && pred(e));
  const last = (types) => [...evs].reverse().find((e) => types.includes(e.event_type));
  const started = first('supervisor_started');
  const terminal = last(['supervisor_complete', 'error']);
  const t0 = started ? at(started) : ms(run.started_at) ?? (evs.length ? at(evs[0]) : now);
  const tEnd = terminal ? at(terminal) : ms(run.completed_at) ?? (UNFINISHED.has(run.status) ? now : (evs.length ? at(evs[evs.length - 1]) : t0));
  const span = (start, end) => ({ start: iso(start), duration_ms: Math.max(0, (end ?? start) - start) });
  const runStatus = run.status === 'success' ? 'ok' : UNFINISHED.has(run.status) ? 'running' : 'error';

  const root = node({ span_id: 'run', name: 'zerg.run', kind: 'run', label: `Run ${run.run_id} · supervisor`,
    ...span(t0, tEnd), status: runStatus, tokens_in: run.tokens_in || 0, tokens_out: run.tokens_out || 0,
    cost_usd: run.cost_usd || 0, payload: { task: run.task, trigger: run.trigger, status: run.status } });

  const spawned = evs.filter((e) => e.event_type === 'worker_spawned');
  const planEnd = spawned.length ? at(spawned[0]) : tEnd;
  root.children.push(node({ span_id: 'supervisor-plan', name: 'invoke_agent supervisor', kind: 'supervisor',
    label: 'Supervisor · plan', ...span(t0, planEnd), payload: started ? started.payload : null }));

  let lastWorkerEnd = null;
  for (const w of run.workers || []) {
    const mine = (e) => e.payload && e.payload.job_id === w.job_id;
    const spawn = first('worker_spawned', mine);
    const done = first('worker_complete', mine);
    const summary = first('worker_summary_ready', mine);
    const start = spawn ? at(spawn) : ms(w.started_at) ?? t0;
    const going = UNFINISHED_JOB.has(w.status);
    const end = done ? at(done) : ms(w.finished_at) ?? (going ? now : start);
    const usage = w.usage || {};
    const worker = node({ span_id: `worker-${w.job_id}`, name: 'invoke_agent worker', kind: 'worker', job_id: w.job_id,
      label: w.title || w.task || `Worker ${w.job_id}`, ...span(start, end), status: WORKER_STATUS[w.status] || w.status,
      status_message: w.status !== 'success' ? w.error : null, tokens_in: usage.tokens_in || 0,
      tokens_out: usage.tokens_out || 0, cost_usd: usage.cost_usd || 0,
      payload: { task: w.task, summary: w.summary, error: w.error, command: w.command } });
    (w.tool_calls || []).forEach((c, i) => {
      const cs = ms(c.started_at);
      if (cs == null) return;
      worker.children.push(node({ span_id: `tool-${w.job_id}-${i}`, name: `execute_tool ${c.tool}`, kind: 'tool',
        label: `${c.tool}${c.command ? ` · ${c.command}` : ''}`, ...span(cs, cs + (c.duration_ms || 0)),
        status: c.ok === false ? 'error' : 'ok', payload: c }));
    });
    for (const asked of evs.filter((e) => e.event_type === 'approval_requested' && mine(e))) {
      const answer = first('approval_answered', (e) => e.payload && e.payload.approval_id === asked.payload.approval_id);
      worker.children.push(node({ span_id: `approval-${asked.payload.approval_id}`, name: 'approval_wait', kind: 'step',
        label: `Waiting for your approval · ${asked.payload.tool || ''}`, ...span(at(asked), answer ? at(answer) : end),
        status: answer ? (answer.payload.status === 'approved' ? 'ok' : 'error') : 'running', payload: asked.payload }));
    }
    if (summary) {
      worker.children.push(node({ span_id: `summary-${w.job_id}`, name: 'summarize worker', kind: 'step',
        label: 'Summary', ...span(end, at(summary)), payload: summary.payload }));
    }
    worker.children.sort((a, b) => ms(a.start) - ms(b.start));
    const workerEnd = Math.max(end, summary ? at(summary) : end);
    lastWorkerEnd = lastWorkerEnd == null ? workerEnd : Math.max(lastWorkerEnd, workerEnd);
    root.children.push(worker);
  }
  if (spawned.length && terminal) {
    const from = Math.min(lastWorkerEnd ?? planEnd, tEnd);
    root.children.push(node({ span_id: 'supervisor-answer', name: 'invoke_agent supervisor', kind: 'supervisor',
      label: 'Supervisor · answer', ...span(from, tEnd), status: terminal.event_type === 'error' ? 'error' : 'ok',
      payload: terminal.payload }));
  }
  return [root];
}

const UNFINISHED = new Set(['queued', 'running', 'awaiting_approval']);
const UNFINISHED_JOB = new Set(['queued', 'running']);

/** The rows of a tree, depth first, each with its depth, its bar's offset and width (% of the whole). */
export function layout(roots) {
  let lo = Infinity;
  let hi = -Infinity;
  const walk = (n) => {
    const s = ms(n.start);
    lo = Math.min(lo, s);
    hi = Math.max(hi, s + n.duration_ms);
    n.children.forEach(walk);
  };
  roots.forEach(walk);
  const total = Math.max(hi - lo, 1);
  const place = (n) => ({ left: ((ms(n.start) - lo) / total) * 100, width: Math.max((n.duration_ms / total) * 100, 0.4) });
  return { place, total, start: lo };
}

/** The timeline's rows: a streamed answer's consecutive `answer_delta` events as one row (the first,
 * with how many), every other event as itself; each with the event before it for the Δ. */
export function timeline(evs) {
  const rows = [];
  evs.forEach((e, i) => {
    const last = rows[rows.length - 1];
    if (last && e.event_type === 'answer_delta' && last.e.event_type === 'answer_delta') last.n += 1;
    else rows.push({ e, prev: i > 0 ? evs[i - 1] : null, n: 1 });
  });
  return rows;
}
