import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../config/load.js';
import { configSchema } from '../../config/schema.js';
import { configErrorOf as errorOf } from '../fixtures/config-error.js';

function writeConfig(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'rs-config-'));
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}


describe('config schema', () => {
  test('an empty config takes every default of SPEC §9', () => {
    const c = configSchema.parse({});
    expect(c.accumulate).toEqual({ allow_mixed_agents: false, group_timeout_ms: 1_800_000, emitted_retention_ms: 86_400_000, batch_end_grace_ms: 5_000 });
    expect(c.postprocess.max_total_tokens_per_sample).toBe(65536);
    expect(c.postprocess.mask_env_flagged_samples).toBe(true);
    expect(c.postprocess.identity_group_size).toBeNull();
    expect(c.postprocess.effort).toEqual({ low_weight: 0, low_penalty: 1, low_ub: 64000, low_string: '' });
    expect(c.postprocess.reward_penalties).toBeNull();
    expect(c.postprocess.length_penalty).toEqual({ enabled: false, coef: 1, correct_threshold: 0 });
    expect(c.pack.pad_values).toEqual({ token_ids: 0 });
    expect(c.pack.include_message_violation_fields).toBe(false);
  });

  test('null means the default: a null flag is off and a null mask gate is on', () => {
    const c = configSchema.parse({
      postprocess: { mask_env_flagged_samples: null, reward_penalties: { penalize_empty_final_answer: null, thinking_tags: null } },
    });
    expect(c.postprocess.mask_env_flagged_samples).toBe(true);
    expect(c.postprocess.reward_penalties?.penalize_empty_final_answer).toBe(false);
    expect(c.postprocess.reward_penalties?.thinking_tags).toEqual(['<think>', '</think>']);
  });

  test('a scalar unwanted token id is accepted as a one-element list', () => {
    const c = configSchema.parse({ postprocess: { reward_penalties: { token_ids: { unwanted: 7 } } } });
    expect(c.postprocess.reward_penalties?.token_ids.unwanted).toEqual([7]);
  });
});

describe('loadConfig', () => {
  test('a YAML file is read and validated', () => {
    const path = writeConfig('c.yaml', 'postprocess:\n  length_penalty: {enabled: true, coef: 0.5}\n');
    const { config, configDir } = loadConfig({ file: path, env: {} });
    expect(config.postprocess.length_penalty).toEqual({ enabled: true, coef: 0.5, correct_threshold: 0 });
    expect(configDir).toBe(join(path, '..'));
  });

  test('a flag given 0 instead of a boolean is a config error naming the key', () => {
    const path = writeConfig('c.json', JSON.stringify({ postprocess: { reward_penalties: { penalize_unwanted_tokens: 0 } } }));
    const e = errorOf(() => loadConfig({ file: path, env: {} }));
    expect(e.path).toBe('postprocess.reward_penalties.penalize_unwanted_tokens');
  });

  test("runtime.fused is 'auto' by default, takes true/false, and anything else is a config error naming it", () => {
    expect(configSchema.parse({}).runtime.fused).toBe('auto');
    expect(configSchema.parse({ runtime: { fused: false } }).runtime.fused).toBe(false);
    expect(loadConfig({ file: writeConfig('f.json', '{"runtime":{"fused":true}}') }).config.runtime.fused).toBe(true);
    const e = errorOf(() => loadConfig({ file: writeConfig('g.json', '{"runtime":{"fused":"yes"}}') }));
    expect(e.path).toBe('runtime.fused');
  });

  test('an unknown key is refused, naming it', () => {
    const path = writeConfig('c.yaml', 'postprocess:\n  max_total_tokens: 10\n');
    const e = errorOf(() => loadConfig({ file: path, env: {} }));
    expect(e.path).toBe('postprocess');
    expect(e.message).toMatch(/max_total_tokens/);
  });

  test('a thinking_tags list with one entry is a config error', () => {
    const path = writeConfig('c.yaml', 'postprocess:\n  reward_penalties:\n    thinking_tags: ["<think>"]\n');
    expect(errorOf(() => loadConfig({ file: path, env: {} })).path).toBe('postprocess.reward_penalties.thinking_tags');
  });

  test('a wrong type deep in the tree names the full path', () => {
    const path = writeConfig('c.yaml', 'postprocess:\n  effort: {low_ub: "lots"}\n');
    expect(errorOf(() => loadConfig({ file: path, env: {} })).path).toBe('postprocess.effort.low_ub');
  });

  test('a file that is not valid YAML is reported as such', () => {
    const path = writeConfig('c.yaml', 'postprocess: [unclosed\n');
    expect(errorOf(() => loadConfig({ file: path, env: {} })).message).toMatch(/not valid YAML/);
  });

  test('a missing file is reported with its path', () => {
    expect(errorOf(() => loadConfig({ file: '/nonexistent/rs.yaml', env: {} })).message).toMatch(/\/nonexistent\/rs\.yaml/);
  });

  test('environment variables override the file and flags override the environment', () => {
    const path = writeConfig('c.yaml', 'kafka: {brokers: ["file:1"]}\ntopics: {prefix: "file."}\n');
    const { config } = loadConfig({
      file: path,
      env: { KAFKA_BROKERS: 'a:1, b:2', SCHEMA_REGISTRY_URL: 'http://reg:1', TOPIC_PREFIX: 'env.' },
      overrides: [[['topics', 'prefix'], 'flag.']],
    });
    expect(config.kafka.brokers).toEqual(['a:1', 'b:2']);
    expect(config.kafka.schema_registry_url).toBe('http://reg:1');
    expect(config.topics.prefix).toBe('flag.');
  });

  test('ROLLOUT_STREAM_CONFIG names the file when no flag does', () => {
    const path = writeConfig('c.yaml', 'pack: {include_message_violation_fields: true}\n');
    expect(loadConfig({ env: { ROLLOUT_STREAM_CONFIG: path } }).config.pack.include_message_violation_fields).toBe(true);
  });

  test('SASL and TLS settings come from the environment', () => {
    const { config } = loadConfig({
      env: { KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p', KAFKA_TLS: 'true' },
    });
    expect(config.kafka.sasl).toEqual({ mechanism: 'scram-sha-512', username: 'u', password: 'p' });
    expect(config.kafka.tls?.enabled).toBe(true);
  });

  test('an unsupported SASL mechanism is a config error', () => {
    expect(errorOf(() => loadConfig({ env: { KAFKA_SASL_MECHANISM: 'gssapi' } })).path).toMatch(/^kafka\.sasl/);
  });
});
