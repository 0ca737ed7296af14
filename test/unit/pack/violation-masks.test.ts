import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { cfg, field, group, msg, nums } from './builders.js';

const log = [
  msg('user', [1], { invalid: true }), // not generated: a user turn
  msg('assistant', [2], { malformed: true }), // prompt history: no logprobs
  msg('assistant', [3, 4], { lp: [-1, -1], invalid: true }),
  msg('assistant', [5], { lp: [-1], malformed: true, invalid: false }),
];

describe('message violation masks', () => {
  test('are absent unless include_message_violation_fields is on', () => {
    const names = packGroup(group([log]), cfg()).fields.map((f) => f.name);
    expect(names).not.toContain('invalid_tool_call_mask');
    expect(names).not.toContain('malformed_thinking_mask');
  });

  test('cover the tokens of generated assistant messages carrying the flag, as jagged bool', () => {
    const packed = packGroup(group([log]), cfg({ include_message_violation_fields: true }));
    const invalid = field(packed, 'invalid_tool_call_mask');
    const malformed = field(packed, 'malformed_thinking_mask');
    expect(invalid.dtype).toBe('bool');
    expect(invalid.layout).toBe('jagged');
    expect(invalid.values).toBeInstanceOf(Uint8Array);
    expect(nums(invalid.values)).toEqual([0, 0, 1, 1, 0]);
    expect(nums(malformed.values)).toEqual([0, 0, 0, 0, 1]);
  });

  test('violation counts travel in the tags, copied from the penalized rows', () => {
    const g = group([log, log], {
      counts: [
        { num_invalid_tool_calls: 1, num_malformed_thinking: 1, num_assistant_messages: 2 },
        { num_invalid_tool_calls: 0, num_malformed_thinking: 2, num_assistant_messages: 3 },
      ],
    });
    const tags = packGroup(g, cfg()).tags;
    expect(tags.map((t) => [t.num_invalid_tool_calls, t.num_malformed_thinking, t.num_assistant_messages])).toEqual([
      [1, 1, 2],
      [0, 2, 3],
    ]);
  });
});
