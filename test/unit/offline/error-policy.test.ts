/**
 * The offline runner agrees with the Kafka stages on errors: a processor's
 * decisions and pack's PackError are dead letters; any other exception
 * follows runtime.poison.policy without retries (dead-letter: at once as
 * processing_error; stop: the run fails, so `offline` exits non-zero).
 */
import { describe, expect, test } from 'vitest';
import { OfflinePipeline, type OfflineOutput } from '../../../cli/offline-pipeline.js';
import { offlineIngestConfig } from '../../../cli/offline.js';
import { configSchema } from '../../../config/schema.js';
import { RolloutStreamError } from '../../../errors/index.js';
import { rowToJson } from '../../../json-form/form.js';
import type { ResolvedPostprocessConfig } from '../../../processors/postprocess.js';
import { makeGroup } from '../accumulate/fixtures.js';

// One complete group's rows: accumulate emits it, postprocess gets it.
const rows = () => makeGroup({ num_generations: 2 }).map((r) => JSON.stringify(rowToJson(r)));

// A postprocess configuration whose every read throws: a bug inside postprocess, not a verdict on the group.
const broken = new Proxy({}, {
  get() {
    throw new TypeError('postprocess bug');
  },
}) as ResolvedPostprocessConfig;

function pipeline(policy: 'dead-letter' | 'stop') {
  const config = configSchema.parse({ runtime: { poison: { policy } } });
  const out: OfflineOutput[] = [];
  const p = new OfflinePipeline('all', config, broken, offlineIngestConfig(config, process.cwd()), (o) => void out.push(o));
  return { p, out };
}

describe('offline and the poison policy', () => {
  test('dead-letter: an exception in postprocess is a processing_error dead letter at once', () => {
    const { p, out } = pipeline('dead-letter');
    for (const r of rows()) p.feed(r);
    expect(out).toEqual([{ kind: 'dead_letter', deadLetter: expect.objectContaining({ reason: 'processing_error', message: 'postprocess failed: postprocess bug' }) }]);
  });

  test('stop: an exception in postprocess ends the run', () => {
    const { p, out } = pipeline('stop');
    let thrown: unknown;
    try {
      for (const r of rows()) p.feed(r);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(RolloutStreamError);
    expect((thrown as RolloutStreamError).message).toMatch(/^offline postprocess failed on group \S+: TypeError: postprocess bug \(runtime\.poison\.policy is stop\)$/);
    expect(out).toEqual([]);
  });
});
