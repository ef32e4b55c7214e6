import { describe, expect, it } from 'vitest';
import { EMPTY, applyDelta, codePoints, withDelta, withFinalAnswer, withoutDraft } from './answerStream.js';

const fold = (events, draft = EMPTY) => events.reduce(applyDelta, draft);

describe('applyDelta', () => {
  it('builds the draft in offset order and counts code points as the server does', () => {
    const d = fold([{ offset: 0, text: 'Disk ✓ 🙂 ', reset: true }, { offset: 9, text: 'full' }]);
    expect(d.text).toBe('Disk ✓ 🙂 full');
    expect(d.next).toBe(13);
    expect(codePoints('🙂')).toBe(1);
  });

  it('never applies an event twice (a replay from the start after a reload)', () => {
    const events = [{ offset: 0, text: 'a', reset: true }, { offset: 1, text: 'b' }];
    expect(fold([...events, events[1]]).text).toBe('ab');
  });

  it('stops at a gap instead of drawing wrong text', () => {
    const d = fold([{ offset: 0, text: 'a', reset: true }, { offset: 5, text: 'xyz' }, { offset: 1, text: 'b' }]);
    expect(d).toEqual({ text: 'a', next: 1, gap: true });
  });

  it('starts again on reset: a retried call, or a withdrawal', () => {
    expect(fold([{ offset: 0, text: 'Let me check', reset: true }, { offset: 0, text: '', reset: true }]).text).toBe('');
    expect(fold([{ offset: 0, text: 'first', reset: true }, { offset: 0, text: 'second', reset: true }]).text).toBe('second');
  });
});

describe('the draft message', () => {
  const user = { key: 'u1', role: 'user', content: 'check disk' };

  it('appears with the first delta, grows, and the final answer replaces it', () => {
    let ms = withDelta([user], 7, { offset: 0, text: 'Disk is', reset: true });
    expect(ms).toHaveLength(2);
    expect(ms[1]).toMatchObject({ key: 'run-7', role: 'assistant', runId: 7, content: 'Disk is', streaming: true });
    ms = withDelta(ms, 7, { offset: 7, text: ' 78% full.' });
    expect(ms[1].content).toBe('Disk is 78% full.');
    ms = withFinalAnswer(ms, { key: 'run-7', role: 'assistant', runId: 7, content: 'Disk is 78% full.\n\nMore.', jobIds: [3] });
    expect(ms).toHaveLength(2);
    expect(ms[1].streaming).toBeUndefined();
    expect(ms[1].content).toBe('Disk is 78% full.\n\nMore.');
  });

  it('goes when the text is withdrawn, the turn staying for its steps', () => {
    const turn = { key: 'run-7', role: 'assistant', runId: 7, content: '', jobIds: [] };
    let ms = withDelta([user, turn], 7, { offset: 0, text: 'Let me check', reset: true });
    expect(ms[1]).toMatchObject({ key: 'run-7', content: 'Let me check', streaming: true });
    ms = withDelta(ms, 7, { offset: 0, text: '', reset: true });
    expect(ms).toEqual([user, turn]);
    expect(withDelta([user, turn], 7, { offset: 0, text: '', reset: true })).toEqual([user, turn]);
  });

  it("fills the run's empty turn and the final answer settles it there", () => {
    const turn = { key: 'run-7', role: 'assistant', runId: 7, content: '', jobIds: [] };
    let ms = withDelta([user, turn], 7, { offset: 0, text: 'Disk', reset: true });
    expect(ms).toHaveLength(2);
    ms = withFinalAnswer(ms, { key: 'run-7', role: 'assistant', runId: 7, content: 'Disk is fine.', jobIds: [4] });
    expect(ms).toEqual([user, { ...turn, content: 'Disk is fine.', jobIds: [4] }]);
    expect(withFinalAnswer([user, turn], { key: 'run-7', role: 'assistant', runId: 7, content: 'Whole.', jobIds: [] })[1].content).toBe('Whole.');
  });

  it('is never drawn beside an answer already on the page (re-attached after a reload)', () => {
    const stored = { key: 'm-12', id: 12, role: 'assistant', runId: 7, content: 'The answer.' };
    const ms = withDelta([user, stored], 7, { offset: 0, text: 'The', reset: true });
    expect(ms).toEqual([user, stored]);
    expect(withFinalAnswer(ms, { key: 'run-7', role: 'assistant', runId: 7, content: 'The answer.' })).toEqual([user, stored]);
  });

  it('goes when the run fails or is cancelled mid-answer', () => {
    const turn = { key: 'run-7', role: 'assistant', runId: 7, content: '', jobIds: [] };
    const ms = withDelta([user, turn], 7, { offset: 0, text: 'Half an', reset: true });
    expect(withoutDraft(ms, 7)).toEqual([user, turn]);
    expect(withoutDraft([user], 7)).toEqual([user]);
  });

  it('leaves other runs alone', () => {
    const other = { key: 'run-3', role: 'assistant', runId: 3, content: 'Old.', streaming: true, draft: { text: 'Old.', next: 4, gap: false } };
    const ms = withDelta([other], 7, { offset: 0, text: 'New', reset: true });
    expect(ms.map((m) => m.content)).toEqual(['Old.', 'New']);
  });
});
