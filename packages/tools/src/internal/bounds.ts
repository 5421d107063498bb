/** The tools' own bounds, in milliseconds; the registry's are in `Limits`. */
export const DEFAULT_TIMEOUT_MS = 120_000
export const MAX_TIMEOUT_MS = 600_000
export const DEFAULT_WAIT_MS = 30_000
export const MAX_WAIT_MS = 600_000
/** `bash_output` `tail_lines`: more than a result can carry (30000 characters) already. */
export const MAX_TAIL_LINES = 10_000
