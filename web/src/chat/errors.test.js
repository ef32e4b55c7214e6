import { describe, expect, it } from 'vitest';
import { ApiError } from '../api.js';
import { plainReason, repeatsRun, runEnding, sentence } from './errors.js';

describe('errors as sentences', () => {
  it('maps the server\'s validation message to a sentence with a next step', () => {
    const err = new ApiError(422, 'validation_error', 'utterance: String should have at most 4000 characters');
    expect(sentence(err)).toBe('Your message is too long: at most 4,000 characters. Shorten it and send it again.');
  });
  it('maps the run\'s byte limit (413) and the network', () => {
    expect(sentence(new ApiError(413, 'payload_too_large', 'task is 9000 bytes; the limit is 8192')))
      .toBe('Your message is too long for a run: at most 8,192 bytes of text. Shorten it and send it again.');
    expect(sentence(new ApiError(0, 'network', 'x'))).toBe('Jarvis cannot be reached. Check your connection, then try again.');
  });
  it('says an unavailable server and an internal error with what to do', () => {
    expect(sentence(new ApiError(503, 'unavailable', 'the run could not be started; try again')))
      .toBe('Jarvis cannot do that right now: the run could not be started. Try again in a moment.');
    expect(sentence(new ApiError(500, 'internal', 'boom'))).toMatch(/^Jarvis hit an internal error\. Try again/);
  });
  it('says how a run ended in one line, without the process\'s pid or host', () => {
    const msg = 'interrupted: the process executing the run (pid 4242 on host-77) stopped before it finished';
    expect(runEnding('interrupted', msg)).toBe('This run was interrupted: the process running it stopped before it answered.');
    expect(runEnding('cancelled')).toBe('You cancelled this run.');
    expect(runEnding('failed', 'failed: the model is down')).toBe('This run failed: the model is down.');
    expect(runEnding('failed', 'LLMError: model gpt-4o at http://127.0.0.1:9/v1 answered HTTP 400: Error code: 400 - down'))
      .toBe('This run failed: the model gpt-4o could not answer (HTTP 400: down). Run it again; if it keeps failing, '
        + 'check the model in Dashboard › Agents.');
    expect(plainReason('LLMError: model m at http://x/v1 answered HTTP 503')).toBe('the model m could not answer (HTTP 503)');
    expect(runEnding('failed', 'ValueError: bad plan')).toBe('This run failed: bad plan.');
    expect(repeatsRun(msg, msg)).toBe(true);
    expect(repeatsRun('disk full', msg)).toBe(false);
  });
});
