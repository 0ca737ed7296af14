/**
 * The load generator's pure core (SPEC §7): seeded synthetic rollout rows
 * with realistic shapes, out-of-order completion, delay hints and fault
 * injection with the expected outcome of every fault. No Kafka here: a
 * producer wrapper sends what `generateEvents` yields.
 */
export {
  generateEvents,
  resolveLoadgenOptions,
  formatBatchId,
  formatGroupId,
  DEFAULT_START_TIME_MS,
  type LoadgenOptions,
  type ResolvedLoadgenOptions,
} from './generate-events.js';
export {
  collectExpectations,
  type Expectations,
  type ExpectedOutcome,
  type GymLoadgenEvent,
  type GymResultEvent,
  type LoadgenEvent,
} from './events.js';
export { asGymResultEvents, gymResultFromRow, routedExpertsEnvelope } from './gym-result.js';
export {
  parseFaultSpec,
  formatFaultSpec,
  validateFaultSpec,
  noFaults,
  FaultSpecError,
  FAULT_KINDS,
  ROW_FAULTS,
  GROUP_FAULTS,
  type FaultKind,
  type FaultSpec,
} from './fault-spec.js';
export { PROFILES, resolveShape, type Profile, type ProfileName, type RowShape, type ShapeOverrides, type MediaSpec } from './profiles.js';
export { summarizeEvents, addToStats, emptyStats, estimateRowBytes, rowTokenCounts, type LoadgenStats } from './stats.js';
export { createLengthSampler, sampleLength, expectedLength, type LengthSpec } from './length-sampler.js';
export { planGroup, planRow, type GroupPlan, type RowPlan, type TurnPlan } from './conversation-plan.js';
export {
  THINK_OPEN_TOKEN_ID,
  THINK_CLOSE_TOKEN_ID,
  EOS_TOKEN_ID,
  UNWANTED_TOKEN_ID,
  THINK_OPEN_TAG,
  THINK_CLOSE_TAG,
  DEFAULT_VOCAB,
  type RoutesSpec,
  type VocabRange,
} from './tokens.js';
export { Rng, deriveRng, hashSeed } from './random.js';
