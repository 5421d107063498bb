/**
 * @corral/core: process groups as scoped Effect resources, and a registry of
 * background shells.
 *
 * @since 0.1.0
 */

/**
 * How a command line is run: which shell, and the environment that keeps its output unbuffered.
 *
 * @since 0.1.0
 */
export * as CommandShell from "./CommandShell.js"

/**
 * How a shell's processes are held, enumerated, signalled and confirmed gone (cgroup, pidns, procScan).
 *
 * @since 0.1.0
 */
export * from "./Containment.js"

/**
 * Effect's `CommandExecutor` on corral's process groups: a `Command` that stops whole.
 *
 * @since 0.1.0
 */
export * as CorralCommandExecutor from "./CorralCommandExecutor.js"

/**
 * Human durations as typed on a command line or in an environment variable.
 *
 * @since 0.1.0
 */
export * as DurationInput from "./DurationInput.js"

/**
 * The stop: first signal and SIGCONT, a zombie-aware grace, then a bounded kill loop, for many groups at once.
 *
 * @since 0.1.0
 */
export * as GroupStop from "./GroupStop.js"

/**
 * Every bound corral enforces, as one service.
 *
 * @since 0.1.0
 */
export * from "./Limits.js"

/**
 * A byte-capped ring of a shell's output, read by cursor, tail or as a stream.
 *
 * @since 0.1.0
 */
export * as OutputBuffer from "./OutputBuffer.js"

/**
 * A command in its own session and process group, stopped whole when its scope closes.
 *
 * @since 0.1.0
 */
export * as ProcessGroup from "./ProcessGroup.js"

/**
 * The process table and the only place that sends signals, replaceable by a scripted one in tests.
 *
 * @since 0.1.0
 */
export * from "./ProcessTable.js"

/**
 * The journal of live groups that lets the next registry reap what a dead supervisor left.
 *
 * @since 0.1.0
 */
export * as Journal from "./Journal.js"

/**
 * What corral reports about a shell, one Schema per type: `ShellInfo`, `ShellStatus`, `StopReport`, `Supervisor`, ...
 *
 * @since 0.1.0
 */
export * from "./Shell.js"

/**
 * The registry of background shells: ids, limits, lifetime, output, events and ownership.
 *
 * @since 0.1.0
 */
export * from "./ShellRegistry.js"

/**
 * Input to a background shell as at a terminal: text, end of file, and control keys.
 *
 * @since 0.1.0
 */
export * as ShellInput from "./ShellInput.js"

/**
 * The private state directory of journals and control sockets.
 *
 * @since 0.1.0
 */
export * as StateDir from "./StateDir.js"

/**
 * JSON from outside the process, checked for a depth that would overflow the stack of what reads it next.
 *
 * @since 0.1.0
 */
export * as UntrustedJson from "./UntrustedJson.js"

/**
 * The watcher process that stops a dead supervisor's groups.
 *
 * @since 0.1.0
 */
export * as Watcher from "./Watcher.js"

// ControlApi and ControlServer pull in an HTTP stack: import them from
// "@corral/core/ControlApi" and "@corral/core/ControlServer".
