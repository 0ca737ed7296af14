/**
 * Where a command writes: data and reports to `out` (stdout), logs and
 * progress to `err` (stderr). Commands take an `Io` so tests can run them
 * in-process and read what they printed.
 */

export interface Io {
  /** Writes to stdout, honouring backpressure (a slow pipe slows the command, it never buffers without bound). */
  out(text: string): Promise<void>;
  /** Writes to stderr (logs, progress); never data. */
  err(text: string): void;
  /** Whether stderr is a terminal (progress bars are redrawn only there). */
  errIsTty: boolean;
}

export const processIo: Io = {
  out(text) {
    return new Promise((resolve, reject) => {
      if (process.stdout.write(text)) resolve();
      else
        process.stdout.once('drain', resolve).once('error', (e: NodeJS.ErrnoException) => (e.code === 'EPIPE' ? resolve() : reject(e)));
    });
  },
  err(text) {
    process.stderr.write(text);
  },
  errIsTty: process.stderr.isTTY === true,
};

/** An Io that keeps everything in memory (tests). */
export function captureIo(): Io & { stdout: () => string; stderr: () => string; lines: () => string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out: async (t) => void out.push(t),
    err: (t) => void err.push(t),
    errIsTty: false,
    stdout: () => out.join(''),
    stderr: () => err.join(''),
    lines: () => out.join('').split('\n').filter((l) => l.length > 0),
  };
}
