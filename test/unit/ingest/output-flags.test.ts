import { describe, expect, test } from 'vitest';
import { DEFAULT_INVALID_TOOL_CALL_PATTERNS } from '../../../config/schema.js';
import { detectOutputItemFlags } from '../../../processors/gym-output-flags.js';
import type { JsonObject } from '../../../processors/types.js';
import { genItem, gymRecord, ingestCfg, ingestOk } from './builders.js';

const DEFAULTS = ingestCfg();
const flags = (item: JsonObject, cfg = DEFAULTS) =>
  detectOutputItemFlags(item, cfg.invalid_tool_call_patterns, cfg.thinking_tags);
const content = (text: unknown, extra: JsonObject = {}): JsonObject =>
  ({ type: 'message', content: [{ type: 'output_text', text }], ...extra }) as JsonObject;
const reasoning = (text: unknown): JsonObject => ({ type: 'reasoning', summary: [{ type: 'summary_text', text }] }) as JsonObject;
const NONE = { is_invalid_tool_call: false, has_malformed_thinking: false };

describe('invalid tool call and malformed thinking detector (SPEC §2.1 rule 3)', () => {
  test('a plain content message raises neither flag', () => {
    expect(flags(content('the answer is 4'))).toEqual(NONE);
  });

  test.each(DEFAULT_INVALID_TOOL_CALL_PATTERNS)('the default pattern %s in content text marks an invalid tool call', (p) => {
    expect(flags(content(`I will call ${p}search{"q":1}`))).toEqual({ is_invalid_tool_call: true, has_malformed_thinking: false });
  });

  test('a single thinking tag in content text is malformed thinking', () => {
    expect(flags(content('<think>oops'))).toEqual({ is_invalid_tool_call: false, has_malformed_thinking: true });
    expect(flags(content('done</think> 4'))).toEqual({ is_invalid_tool_call: false, has_malformed_thinking: true });
  });

  test('a tool-call pattern in a reasoning summary marks an invalid tool call', () => {
    expect(flags(reasoning('let me <tool_call>search</tool_call>'))).toEqual({ is_invalid_tool_call: true, has_malformed_thinking: false });
  });

  test('in a reasoning summary one thinking tag is fine and a repeated tag is malformed', () => {
    expect(flags(reasoning('<think>step</think>'))).toEqual(NONE);
    expect(flags(reasoning('<think>a</think><think>b'))).toEqual({ is_invalid_tool_call: false, has_malformed_thinking: true });
    expect(flags(reasoning('a</think>b</think>'))).toEqual({ is_invalid_tool_call: false, has_malformed_thinking: true });
  });

  test('a summary is only read on an item whose type is reasoning', () => {
    expect(flags({ type: 'message', summary: [{ text: '<think><think><tool_call>' }] })).toEqual(NONE);
  });

  test('the content branch wins over the reasoning branch when both apply', () => {
    const item = { type: 'reasoning', content: [{ text: 'clean' }], summary: [{ text: '<tool_call><think><think>' }] };
    expect(flags(item)).toEqual(NONE);
    const once = { type: 'reasoning', content: [{ text: 'x<think>' }], summary: [{ text: 'clean' }] };
    expect(flags(once)).toEqual({ is_invalid_tool_call: false, has_malformed_thinking: true });
  });

  test('string content, null text, a non-object first part and empty lists raise neither flag', () => {
    expect(flags({ type: 'message', content: '<tool_call><think>' })).toEqual(NONE);
    expect(flags(content(null))).toEqual(NONE);
    expect(flags({ type: 'message', content: ['<tool_call>'] })).toEqual(NONE);
    expect(flags({ type: 'message', content: [] })).toEqual(NONE);
    expect(flags({ type: 'reasoning', summary: [] })).toEqual(NONE);
    expect(flags(reasoning(null))).toEqual(NONE);
    expect(flags({ type: 'function_call', name: 'x', arguments: '<tool_call>' })).toEqual(NONE);
  });

  test('only the first content part is inspected', () => {
    const item = { type: 'message', content: [{ text: 'clean' }, { text: '<tool_call><think>' }] };
    expect(flags(item)).toEqual(NONE);
    // A first part without text does not pass the check on to the next part.
    const refusal: JsonObject = { type: 'message', content: [{ type: 'refusal', refusal: 'no' }, { text: '<tool_call><think>' }] };
    expect(flags(refusal)).toEqual(NONE);
    const reasoningItem: JsonObject = { type: 'reasoning', summary: [{ text: null }, { text: '<tool_call><think><think>' }] };
    expect(flags(reasoningItem)).toEqual(NONE);
  });

  test('custom patterns replace the defaults', () => {
    const cfg = ingestCfg({ invalid_tool_call_patterns: ['CALL('] });
    expect(flags(content('CALL(search)'), cfg).is_invalid_tool_call).toBe(true);
    expect(flags(content('<tool_call>'), cfg).is_invalid_tool_call).toBe(false);
  });

  test('an empty or null pattern list in the config means the defaults', () => {
    for (const raw of [{ invalid_tool_call_patterns: [] }, { invalid_tool_call_patterns: null }, {}]) {
      const cfg = ingestCfg(raw);
      expect(cfg.invalid_tool_call_patterns).toEqual(DEFAULT_INVALID_TOOL_CALL_PATTERNS);
      expect(flags(content('<function_call>'), cfg).is_invalid_tool_call).toBe(true);
    }
    for (const raw of [{ thinking_tags: [] }, { thinking_tags: null }]) {
      expect(flags(content('<think>'), ingestCfg(raw)).has_malformed_thinking).toBe(true);
    }
  });

  test('custom thinking tags replace the defaults, a one-entry list included', () => {
    const cfg = ingestCfg({ thinking_tags: ['<reason>'] });
    expect(flags(content('<reason>x'), cfg).has_malformed_thinking).toBe(true);
    expect(flags(content('<think>x'), cfg).has_malformed_thinking).toBe(false);
    expect(flags(reasoning('<reason>a<reason>b'), cfg).has_malformed_thinking).toBe(true);
    expect(flags(reasoning('<reason>a'), cfg).has_malformed_thinking).toBe(false);
  });

  test('the flags land on the assistant message of the converted row, each turn its own', () => {
    const row = ingestOk(
      gymRecord({
        output: [
          genItem([1, 2], [3], { content: [{ type: 'output_text', text: '<tool_call>x' }] }),
          { type: 'function_call_output', call_id: 'c', output: 'r' },
          genItem([1, 2, 3, 4], [5], { type: 'reasoning', content: null, summary: [{ text: '<think>a<think>' }] }),
        ],
      }),
    );
    const assistants = row.message_log.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => [m.is_invalid_tool_call, m.has_malformed_thinking])).toEqual([
      [true, false],
      [false, true],
    ]);
  });
});
