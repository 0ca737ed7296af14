/**
 * Named fault-injection points, for tests only: inert unless armed, which
 * only the hidden `run --fault POINT:ARG` option does (parsed in cli/run.ts,
 * passed down as typed values). They let a real stage process fail on
 * demand, so the integration tests can drive the error policy
 * (runtime.poison) without touching `processors/`.
 *
 * `<stage>.throw-on-group:<group id>`: the stage's processor throws a plain
 * `Error` (as a programming error would) on any batch holding an input
 * record keyed by that group id, every time it sees one.
 * `<stage>.throw-on-restore`: the stage's processor throws on every
 * changelog record it is asked to restore.
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { InputRecord, Stage, StageName } from '../api/stage.js';

const FAULT_STAGES = ['accumulate', 'postprocess', 'pack'] as const satisfies readonly StageName[];

type FaultStage = (typeof FAULT_STAGES)[number];

export type Fault = { point: 'throw-on-group'; stage: FaultStage; groupId: string } | { point: 'throw-on-restore'; stage: FaultStage };

/** Parses `postprocess.throw-on-group:g-1` or `accumulate.throw-on-restore`; throws a `usage` error naming the accepted forms. */
export function parseFault(spec: string): Fault {
  const m = /^([a-z-]+)\.(throw-on-group:(.+)|throw-on-restore)$/.exec(spec);
  const stage = m?.[1] as FaultStage | undefined;
  if (!m || !stage || !FAULT_STAGES.includes(stage)) {
    throw new RolloutStreamError(
      'usage',
      `--fault ${spec}: expected <${FAULT_STAGES.join('|')}>.throw-on-group:<group id> or <stage>.throw-on-restore (a test-only option)`,
    );
  }
  return m[3] !== undefined ? { point: 'throw-on-group', stage, groupId: m[3] } : { point: 'throw-on-restore', stage };
}

/** `stage` with the faults armed for it wrapped around its processors (the stage itself when none are). */
export function withFaults(stage: Stage, faults: readonly Fault[]): Stage {
  const mine = faults.filter((f) => f.stage === stage.name);
  if (mine.length === 0) return stage;
  const groups = new Set(mine.flatMap((f) => (f.point === 'throw-on-group' ? [f.groupId] : [])));
  const onRestore = mine.some((f) => f.point === 'throw-on-restore');
  return {
    ...stage,
    createProcessor(partition) {
      const processor = stage.createProcessor(partition);
      const process = processor.process.bind(processor);
      processor.process = async (records: InputRecord[], nowMs: number) => {
        const hit = records.find((r) => r.key !== null && groups.has(r.key.toString('utf8')));
        if (hit) throw new Error(`injected fault ${stage.name}.throw-on-group: group ${hit.key!.toString('utf8')} (offset ${hit.offset})`);
        return process(records, nowMs);
      };
      if (onRestore && processor.restore) {
        processor.restore = async (record) => {
          throw new Error(`injected fault ${stage.name}.throw-on-restore: changelog key ${record.key}`);
        };
      }
      return processor;
    },
  };
}
