/**
 * Errors with stable string codes (STYLE.md). Per-record problems are not
 * errors: they are dead-letter decisions returned as values. These classes
 * are for what stops a process: bad configuration, broken invariants.
 */
export class RolloutStreamError extends Error {
  readonly code: string;
  readonly retriable: boolean;

  constructor(code: string, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
  }
}

/** A configuration that cannot run. `path` names the offending key, e.g. `postprocess.reward_penalties.token_ids.unwanted`. */
export class ConfigError extends RolloutStreamError {
  readonly path: string;

  constructor(path: string, message: string, options: { cause?: unknown } = {}) {
    super('config_invalid', `${path}: ${message}`, options);
    this.path = path;
  }
}
