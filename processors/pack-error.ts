/**
 * The one error the pack stage throws. Packing is a pure function whose
 * signature returns a `PackedGroup`, so an input it cannot pack (misaligned
 * per-token tensors, route blocks of different geometry, media of mixed
 * dtype) surfaces as a coded exception; the runtime turns it into a
 * `processing_error` dead letter for the group instead of crashing.
 */
import { RolloutStreamError } from '../errors/index.js';

export type PackErrorCode =
  | 'pack_empty_group'
  | 'pack_misaligned_logprobs'
  | 'pack_bad_routed_experts'
  | 'pack_bad_media';

export class PackError extends RolloutStreamError {
  readonly packCode: PackErrorCode;
  /** Row of the group the problem was found in, when it concerns one row. */
  readonly row: number | null;

  constructor(packCode: PackErrorCode, message: string, row: number | null = null) {
    super(packCode, row === null ? message : `row ${row}: ${message}`);
    this.packCode = packCode;
    this.row = row;
  }
}
