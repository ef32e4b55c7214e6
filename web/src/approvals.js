// Approvals (issue 27): what the chat card, the dashboard and the policy editor share. Pure: no DOM.
//
// An approval comes from GET /api/jarvis/approvals: {id, code, status, call: {tool, arguments, host,
// command, url, method, recipient}, run: {id, job_id, task, trigger}, reason: {untrusted, note, text},
// created_at, expires_at, answered_at}. The reason is the model's words: shown as text, never rendered.

export const APPROVAL_EVENTS = ['approval_requested', 'approval_answered'];
export const TOOL_MODES = ['allow', 'ask', 'deny'];

const STARTED_BY = {
  api: 'you (web or API)', cli: 'you (command line)', schedule: 'a schedule', email: 'an email reply',
  sms: 'an SMS reply', reply: 'a reply', retry: 'a retry',
};

/** Who started the run, in words ("a schedule", "an email reply", "you (web or API)"). */
export function startedBy(trigger) {
  if (!trigger) return 'unknown';
  return STARTED_BY[trigger] || trigger;
}

/** The call's parts the owner decides on, as [label, value] rows (only those that apply). */
export function callRows(call) {
  if (!call) return [];
  const rows = [['Tool', call.tool]];
  if (call.host) rows.push(['Host', call.host]);
  if (call.command) rows.push(['Command', call.command]);
  if (call.url) rows.push(['URL', call.method ? `${call.method} ${call.url}` : call.url]);
  else if (call.method) rows.push(['Method', call.method]);
  if (call.recipient) rows.push(['Recipient', call.recipient]);
  if (!call.command && !call.url) {
    const args = call.arguments || {};
    const shown = Object.keys(args).length ? JSON.stringify(args) : '';
    if (shown) rows.push(['Arguments', shown]);
  }
  return rows;
}

const OUTCOME = {
  approved: 'Approved: the call runs once.',
  denied: 'Denied: the call does not run; the model is told.',
  expired: 'Expired: nobody answered in time; the call did not run.',
  cancelled: 'Cancelled: the run ended before an answer; the call did not run.',
};
const DIRECTIVE_OUTCOME = {
  approved: 'Approved: Zerg makes the change once.',
  denied: 'Denied: the change is not made.',
  expired: 'Expired: nobody answered in time; nothing was done.',
  superseded: 'Superseded: a newer question replaced it; nothing was done.',
};

/** One line for an approval that is no longer pending (a directive's words differ: a change, not a call). */
export function outcomeText(status, kind = 'call') {
  return (kind === 'directive' ? DIRECTIVE_OUTCOME[status] : OUTCOME[status]) || status;
}

/** A pending approval whose expiry has passed cannot be answered any more (the server says so too). */
export function isAnswerable(approval, now = Date.now()) {
  if (!approval || approval.status !== 'pending') return false;
  if (!approval.expires_at) return true;
  const t = new Date(approval.expires_at).getTime();
  return Number.isNaN(t) || t > now;
}

/** The run's approvals to show as cards, oldest first: every one the owner's list has for the run
 * (pending ones to answer; answered ones with their outcome, also when the answer came before the
 * page heard of the request), and those `shown` already that the list no longer has. */
export function cardsForRun(list, runId, shown = []) {
  const byId = new Map(shown.map((a) => [a.id, a]));
  for (const a of list || []) {
    if (a.run && a.run.id === runId) byId.set(a.id, byId.has(a.id) ? { ...a, answer: byId.get(a.id).answer } : a);
  }
  return [...byId.values()].sort((x, y) => x.id - y.id);
}

/** The policy editor's ssh_allow text: one "HOST: PATTERN" line per pattern ("*" for every host). */
export function sshAllowText(sshAllow) {
  const lines = [];
  for (const [host, patterns] of Object.entries(sshAllow || {})) for (const p of patterns) lines.push(`${host}: ${p}`);
  return lines.join('\n');
}

/** Parse the editor's ssh_allow text back; {value} or {error} naming the line. */
export function parseSshAllow(text) {
  const value = {};
  const lines = (text || '').split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i].trim();
    if (!line) continue;
    const m = /^([^\s:]+)\s*:\s*(.+)$/.exec(line);
    if (!m) return { error: `line ${i + 1}: write "HOST: PATTERN" (for example "web1: systemctl status nginx", or "*: uptime")` };
    (value[m[1]] = value[m[1]] || []).push(m[2].trim());
  }
  return { value };
}
