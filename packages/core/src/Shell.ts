/**
 * What corral reports about a shell, one `Schema` per type: its info and
 * status, how its process group ended or was stopped, and the supervisor that
 * holds it. Each TypeScript type here is derived from its schema, and the
 * journal, the control endpoint and `corral ls --json` encode and decode
 * through these schemas, so the shapes cannot drift apart.
 *
 * This module imports nothing but `effect/Schema`: the CLI loads it for
 * `corral ls` without the process machinery.
 */
import * as os from "node:os"
import * as Schema from "effect/Schema"
import { backends } from "./internal/backends.js"

/**
 * A signal's name, as Node knows them (`SIGTERM`, ...).
 *
 * @since 0.1.0
 */
export const SignalName = Schema.String.pipe(
  Schema.filter((name): name is NodeJS.Signals => Object.hasOwn(os.constants.signals, name), {
    message: (issue) => `not a signal name: ${JSON.stringify(issue.actual)}`
  })
)

/**
 * How a shell's processes are held: by a cgroup or a PID namespace of its own
 * (exact), or by process-table scan (group, session, tag and descendants).
 *
 * @since 0.1.0
 */
export const ContainmentBackend = Schema.Literal(...backends)

/**
 * How a process ended: its exit code, or the signal that killed it.
 *
 * @since 0.1.0
 */
export const ExitStatus = Schema.Union(
  Schema.TaggedStruct("Exited", { code: Schema.Number }),
  Schema.TaggedStruct("Signaled", { signal: SignalName })
)

/**
 * @since 0.1.0
 */
export type ExitStatus = typeof ExitStatus.Type

/**
 * Who ended a shell that corral stopped.
 *
 * @since 0.1.0
 */
export const StopCause = Schema.Literal("request", "lifetime", "shutdown")

/**
 * @since 0.1.0
 */
export type StopCause = typeof StopCause.Type

/**
 * Where a shell is in its life.
 *
 * @since 0.1.0
 */
export const ShellStatus = Schema.Union(
  Schema.TaggedStruct("Running", {}),
  /** The leader exited but members of its group still run. */
  Schema.TaggedStruct("Lingering", { exit: ExitStatus, members: Schema.Number }),
  Schema.TaggedStruct("Stopping", { by: StopCause }),
  Schema.TaggedStruct("Exited", { code: Schema.Number }),
  /** `by` is absent when the signal came from outside corral. */
  Schema.TaggedStruct("Killed", { signal: SignalName, by: Schema.optional(StopCause) })
)

/**
 * @since 0.1.0
 */
export type ShellStatus = typeof ShellStatus.Type

/**
 * Whether a shell still has processes that corral holds: running, lingering or stopping.
 *
 * @since 0.1.0
 */
export const isActive = (status: ShellStatus) =>
  status._tag === "Running" || status._tag === "Lingering" || status._tag === "Stopping"

/**
 * The largest terminal corral makes or resizes to (`MAX_TERMINAL_SIZE`, in
 * columns and in rows), and the size of one unless a caller says otherwise.
 *
 * @since 0.1.0
 */
export { defaultTerminalSize, MAX_TERMINAL_SIZE } from "./internal/terminalSize.js"
import { MAX_TERMINAL_SIZE } from "./internal/terminalSize.js"

const terminalSide = (unit: string) =>
  Schema.Int.pipe(
    Schema.between(1, MAX_TERMINAL_SIZE, { message: (issue) => `not a whole number of ${unit} from 1 to ${MAX_TERMINAL_SIZE}: ${JSON.stringify(issue.actual)}` })
  )

/**
 * The size of a shell's terminal (`tty`), in character cells.
 *
 * @since 0.1.0
 */
export const TerminalSize = Schema.Struct({
  cols: terminalSide("columns"),
  rows: terminalSide("rows")
})

/**
 * @since 0.1.0
 */
export interface TerminalSize extends Schema.Schema.Type<typeof TerminalSize> {}

/**
 * A background shell as its registry reports it.
 *
 * @since 0.1.0
 */
export const ShellInfo = Schema.Struct({
  /** The registry's id: `s` and a counter. */
  id: Schema.String,
  /** `CORRAL_SHELL_ID` of its processes, unique across supervisors: `<supervisor pid>:<id>`. */
  tag: Schema.String,
  pid: Schema.Number,
  command: Schema.String,
  cwd: Schema.String,
  name: Schema.optional(Schema.String),
  owner: Schema.String,
  /** How its processes are held (absent in journals of older versions). */
  containment: Schema.optional(ContainmentBackend),
  /** Present and true when its stdin, stdout and stderr are a pseudo-terminal (`tty: true`). */
  tty: Schema.optional(Schema.Boolean),
  /** Epoch milliseconds (the registry's `Clock`). */
  startedAt: Schema.Number,
  endedAt: Schema.optional(Schema.Number),
  status: ShellStatus
})

/**
 * @since 0.1.0
 */
export interface ShellInfo extends Schema.Schema.Type<typeof ShellInfo> {}

/**
 * How the stop of one process group went.
 *
 * @since 0.1.0
 */
export const StopReport = Schema.Struct({
  pgid: Schema.Number,
  /** How membership was known: `cgroup` or `pidns` (exact), or `procScan` (group, session, tag and descendants). */
  containment: ContainmentBackend,
  /** Signals sent, by name. */
  signals: Schema.Struct({ SIGTERM: Schema.Number, SIGCONT: Schema.Number, SIGKILL: Schema.Number }),
  /** Whether anything needed SIGKILL. */
  escalated: Schema.Boolean,
  /** Processes that were still alive when the grace ran out, or found later: each needed SIGKILL. */
  killed: Schema.Number,
  /** From the stop's start until this group was empty (or the stop gave up on it); groups stopped together each have their own. */
  durationMs: Schema.Number,
  /** Live processes when the stop began. */
  members: Schema.Number,
  /** Pids still alive when the kill loop gave up (uninterruptible sleep, or no permission). */
  survivors: Schema.Array(Schema.Number),
  /** Pids that had left the session (`setsid`), found by their tag or their parent and signalled by pid. */
  escaped: Schema.Array(Schema.Number)
})

/**
 * @since 0.1.0
 */
export interface StopReport extends Schema.Schema.Type<typeof StopReport> {}

/**
 * A process id of this machine's range; never 0.
 *
 * @since 0.1.0
 */
export const Pid = Schema.Int.pipe(Schema.between(1, 2 ** 22))

/**
 * A supervisor as `corral ls` shows it: the process that holds a registry of
 * shells. Its journal records more (`Journal.Supervisor`).
 *
 * @since 0.1.0
 */
export const Supervisor = Schema.Struct({
  pid: Pid,
  /** Process-table start time: with the pid, tells this process from a later one that reuses its pid. */
  startTime: Schema.Number,
  name: Schema.String,
  /** Epoch milliseconds. */
  startedAt: Schema.Number
})

/**
 * @since 0.1.0
 */
export interface Supervisor extends Schema.Schema.Type<typeof Supervisor> {}

/**
 * Input for a shell: text, then end of file if asked (`ShellInput.send`, `write_stdin`, `corral attach`).
 *
 * @since 0.1.0
 */
export const Input = Schema.Struct({
  text: Schema.optional(Schema.String),
  /** End of file after the text: stdin closed on a pipe, Ctrl-D typed on a terminal. */
  eof: Schema.optional(Schema.Boolean)
})

/**
 * @since 0.1.0
 */
export interface Input extends Schema.Schema.Type<typeof Input> {}

/**
 * What input became.
 *
 * @since 0.1.0
 */
export const Delivered = Schema.Union(
  /** A control key on a pipe, delivered as the signal a terminal would send. */
  Schema.TaggedStruct("Signaled", { signal: SignalName, key: Schema.String }),
  /**
   * Text written to the pipe or typed into the terminal (`chars` may be 0 with `eof`). `waiting`: the
   * command had not read all of it when the sender stopped waiting; the rest, and the end of file, go
   * to it in order as it reads.
   */
  Schema.TaggedStruct("Written", { chars: Schema.Number, eof: Schema.Boolean, tty: Schema.Boolean, waiting: Schema.optional(Schema.Boolean) })
)

/**
 * @since 0.1.0
 */
export type Delivered = typeof Delivered.Type
