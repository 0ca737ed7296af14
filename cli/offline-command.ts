/** The `offline` command as the launcher's command table loads it (see cli/main.ts); it lives in offline.ts. */
export { offlineCommand } from './offline.js';
