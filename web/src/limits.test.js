import { describe, expect, it } from 'vitest';
import { UTTERANCE_CHARS, nearLimit } from './limits.js';

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
