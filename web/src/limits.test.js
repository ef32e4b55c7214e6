import { describe, expect, it } from 'vitest';
import { TASK_BYTES, UTTERANCE_CHARS, measure, nearLimit, utf8Bytes } from './limits.js';

describe('the composer limit', () => {
  it('is the server\'s 4,000 characters', () => {
    expect(UTTERANCE_CHARS).toBe(4000);
  });
  it('counts only within a tenth of the limit', () => {
    expect(nearLimit(0)).toBe(false);
    expect(nearLimit(3599)).toBe(false);
    expect(nearLimit(3600)).toBe(true);
    expect(nearLimit(UTTERANCE_CHARS)).toBe(true);
    expect(nearLimit(9, 10)).toBe(true);
    expect(nearLimit(8, 10)).toBe(false);
  });
});

describe('the composer counter', () => {
  it('counts characters for plain text, and is silent far from the limit', () => {
    expect(measure('a'.repeat(100)).line).toBe('');
    expect(measure('a'.repeat(3650)).line).toBe('3,650 / 4,000 characters');
    expect(measure('a'.repeat(4000))).toMatchObject({ over: false, atLimit: true });
  });
  it('counts bytes when multi-byte text nears the run limit, and says when it is over', () => {
    expect(utf8Bytes('漢')).toBe(3);
    expect(measure('漢'.repeat(2500)).line).toBe('7,500 / 8,192 bytes');
    const over = measure('漢'.repeat(2731)); // 8,193 bytes, 2,731 characters
    expect(over.over).toBe(true);
    expect(over.line).toBe('Too long: 8,193 / 8,192 bytes; shorten it to send');
    expect(TASK_BYTES).toBe(8192);
  });
});
