import { describe, expect, it } from 'vitest';
import { callRows, cardsForRun, isAnswerable, outcomeText, parseSshAllow, sshAllowText, startedBy } from './approvals.js';

const pending = (id, runId, extra = {}) => ({ id, status: 'pending', run: { id: runId, trigger: 'api' },
  call: { tool: 'ssh_exec', host: 'web1', command: 'systemctl restart nginx', arguments: {} }, ...extra });

describe('approvals', () => {
  it('shows the exact call: host and command, URL with its method, recipient', () => {
    expect(callRows({ tool: 'ssh_exec', host: 'web1', command: 'df -h', arguments: {} }))
      .toEqual([['Tool', 'ssh_exec'], ['Host', 'web1'], ['Command', 'df -h']]);
    expect(callRows({ tool: 'http_request', url: 'https://x.example/hook', method: 'POST', arguments: {} }))
      .toEqual([['Tool', 'http_request'], ['URL', 'POST https://x.example/hook']]);
    expect(callRows({ tool: 'send_email', recipient: 'the owner (email)', arguments: { subject: 'Hi' } }))
      .toEqual([['Tool', 'send_email'], ['Recipient', 'the owner (email)'], ['Arguments', '{"subject":"Hi"}']]);
  });

  it('names who started the run', () => {
    expect(startedBy('schedule')).toBe('a schedule');
    expect(startedBy('email')).toBe('an email reply');
    expect(startedBy('api')).toBe('you (web or API)');
    expect(startedBy(null)).toBe('unknown');
  });

  it('a pending approval past its expiry is not answerable', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    expect(isAnswerable(pending(1, 1, { expires_at: '2026-01-01T12:30:00Z' }), now)).toBe(true);
    expect(isAnswerable(pending(1, 1, { expires_at: '2026-01-01T11:59:59Z' }), now)).toBe(false);
    expect(isAnswerable({ ...pending(1, 1), status: 'approved' }, now)).toBe(false);
    expect(outcomeText('denied')).toMatch(/does not run/);
    expect(outcomeText('superseded', 'directive')).toMatch(/newer question/);
    expect(outcomeText('denied', 'directive')).toMatch(/change is not made/);
  });

  it("shows the run's approvals oldest first, answered ones with their newest status, no other run's", () => {
    const shown = [{ ...pending(1, 7), answer: 'approval 1 approved' }, pending(5, 7)];
    const list = [pending(2, 7), pending(3, 8), { ...pending(1, 7), status: 'approved' }, { ...pending(4, 7), status: 'denied' }];
    const cards = cardsForRun(list, 7, shown);
    expect(cards.map((a) => [a.id, a.status])).toEqual([[1, 'approved'], [2, 'pending'], [4, 'denied'], [5, 'pending']]);
    expect(cards[0].answer).toBe('approval 1 approved');
    expect(cardsForRun(list, 9)).toEqual([]);
  });

  it('round-trips the ssh allowlist text and names a bad line', () => {
    const allow = { web1: ['systemctl restart nginx', 'docker restart **'], '*': ['uptime'] };
    expect(parseSshAllow(sshAllowText(allow))).toEqual({ value: allow });
    expect(parseSshAllow('web1: ok\n\nno colon here').error).toMatch(/^line 3: /);
    expect(parseSshAllow('')).toEqual({ value: {} });
  });
});
