/**
 * A terminal's bounds and default size, declared once: `ProcessGroup` checks
 * sizes without loading `Schema` (`corral run` starts faster), and `Shell`
 * makes them a schema.
 */

/** The largest terminal corral makes or resizes to, in columns and in rows. */
export const MAX_TERMINAL_SIZE = 1000

/** A terminal unless the caller says otherwise: wide enough that few lines wrap. */
export const defaultTerminalSize = { cols: 120, rows: 40 } as const
