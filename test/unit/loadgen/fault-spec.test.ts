import { describe, expect, test } from 'vitest';
import { FaultSpecError, formatFaultSpec, noFaults, parseFaultSpec } from '../../../loadgen/index.js';
import { ConfigError } from '../../../errors/index.js';

describe('parseFaultSpec', () => {
  test('reads every fault kind of the CLI example', () => {
    const spec = parseFaultSpec(
      'dup=0.01,conflict=0.005,out_of_range=0.005,nan=0.005,mixed_agents=0.01,task_mismatch=0.005,garbage=0.002,missing=0.005',
    );
    expect(spec).toEqual({
      dup: 0.01,
      conflict: 0.005,
      out_of_range: 0.005,
      nan: 0.005,
      mixed_agents: 0.01,
      task_mismatch: 0.005,
      garbage: 0.002,
      missing: 0.005,
    });
  });

  test('an empty string and "none" turn every fault off', () => {
    expect(parseFaultSpec('')).toEqual(noFaults());
    expect(parseFaultSpec('  none ')).toEqual(noFaults());
    expect(Object.values(noFaults()).every((v) => v === 0)).toBe(true);
  });

  test('kinds left out are zero and whitespace around entries is ignored', () => {
    const spec = parseFaultSpec(' nan = 0.25 , garbage=1 ');
    expect(spec.nan).toBe(0.25);
    expect(spec.garbage).toBe(1);
    expect(spec.dup).toBe(0);
  });

  test.each([
    ['dupe=0.1', 'dupe'],
    ['nan=abc', 'nan'],
    ['nan=', 'nan'],
    ['missing=1.5', 'missing'],
    ['conflict=-0.1', 'conflict'],
    ['garbage', 'garbage'],
    ['dup=0.1,dup=0.2', 'dup'],
  ])('rejects %s with an error naming %s', (text, key) => {
    let caught: unknown;
    try {
      parseFaultSpec(text);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(FaultSpecError);
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as FaultSpecError).key).toBe(key);
    expect((caught as FaultSpecError).message).toContain(key);
    expect((caught as FaultSpecError).path).toBe(`faults.${key}`);
  });

  test('an unknown kind lists the known ones', () => {
    expect(() => parseFaultSpec('dupe=0.1')).toThrow(/known faults: dup, conflict/);
  });

  test('row faults adding up to more than one are refused, since a row carries at most one', () => {
    expect(() => parseFaultSpec('dup=0.6,nan=0.6')).toThrow(/add up to 1\.2/);
    expect(() => parseFaultSpec('mixed_agents=0.7,task_mismatch=0.4')).toThrow(FaultSpecError);
    expect(() => parseFaultSpec('dup=0.5,nan=0.5,garbage=1,mixed_agents=1')).not.toThrow();
  });

  test('formatFaultSpec writes a string that parses back to the same spec', () => {
    const spec = parseFaultSpec('dup=0.01,mixed_agents=0.2,garbage=0.003');
    expect(parseFaultSpec(formatFaultSpec(spec))).toEqual(spec);
    expect(formatFaultSpec(noFaults())).toBe('none');
  });
});
