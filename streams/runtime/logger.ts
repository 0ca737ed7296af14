/** Where the runtime's one-line messages go (the CLI's logger, or a test's). */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}
