/** Where the runtime's one-line messages go (the CLI's logger, or a test's). */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export type LogLevel = 'info' | 'warn' | 'error';

/** The fields of a JSON log line besides time, level and msg. */
export interface LogFields {
  stage?: string;
  partition?: number;
  group?: string;
  code?: string;
}

const STAGE_NAMES = /^((?:accumulate|postprocess|pack|batch-metrics)(?:\+(?:accumulate|postprocess|pack|batch-metrics))*|fused|separate stages)\b/;

/**
 * The fields a runtime message names, by the convention its messages follow:
 * `<stage or chain>: …`, `partition <n>` (or `p<n>`), `consumer group <id>`,
 * and an error code in brackets (`[task_migrated]`, `fatal [code]`).
 */
export function messageFields(msg: string): LogFields {
  const out: LogFields = {};
  const stage = STAGE_NAMES.exec(msg);
  if (stage) out.stage = stage[1]!;
  const partition = /\bpartition (\d+)\b/.exec(msg) ?? /\bp(\d+)\b/.exec(msg);
  if (partition) out.partition = Number(partition[1]);
  const group = /\bconsumer group (\S+)/.exec(msg);
  if (group) out.group = group[1]!.replace(/[,:;]$/, '');
  const code = /\[([a-z][a-z0-9_]*)\]/.exec(msg);
  if (code) out.code = code[1]!;
  return out;
}

/**
 * One log line (without the newline): `text` is `<ISO time> <level> <msg>`;
 * `json` is one object with `time`, `level`, `msg` and the fields the
 * message names.
 */
export function formatLogLine(format: 'text' | 'json', level: LogLevel, msg: string, now: Date = new Date()): string {
  if (format === 'text') return `${now.toISOString()} ${level} ${msg}`;
  return JSON.stringify({ time: now.toISOString(), level, msg, ...messageFields(msg) });
}
