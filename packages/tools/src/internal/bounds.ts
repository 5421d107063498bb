/** The tools' own bounds, in milliseconds; the registry's are in `Limits`. */
export const DEFAULT_TIMEOUT_MS = 120_000
export const MAX_TIMEOUT_MS = 600_000
export const DEFAULT_WAIT_MS = 30_000
export const MAX_WAIT_MS = 600_000
/** `bash_output` `tail_lines`: more than a result can carry (30000 characters) already. */
export const MAX_TAIL_LINES = 10_000
/** `write_stdin` `wait_ms`: what the shell prints in answer comes quickly, or bash_output wait_for waits for it. */
export const DEFAULT_INPUT_WAIT_MS = 500
export const MAX_INPUT_WAIT_MS = 30_000
