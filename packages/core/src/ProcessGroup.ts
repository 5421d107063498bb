/**
 * A command running in a new session and process group, held as a scoped
 * resource: closing the scope stops the whole group, whatever the leader did.
 */
import { spawn as spawnChild } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import type { Readable, Writable } from "node:stream"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { Backend, Cell } from "./Containment.js"
import { Containment } from "./Containment.js"
import type { StopOptions, StopReport, StopTarget } from "./GroupStop.js"
import * as GroupStop from "./GroupStop.js"
import { Limits } from "./Limits.js"
import type { LimitsShape } from "./Limits.js"
import type { KeptFiles } from "./internal/readSmall.js"
import { makeKeptFiles } from "./internal/readSmall.js"
import { bounded } from "./internal/bounded.js"
import * as Cgroup from "./internal/cgroup.js"
import * as Pidns from "./internal/pidns.js"
import * as Executable from "./internal/executable.js"
import * as MembershipImpl from "./internal/membership.js"
import * as Pty from "./internal/pty.js"
import { afterIoDue } from "./internal/macrotask.js"
import * as Monotonic from "./internal/monotonic.js"
import * as Releases from "./internal/releases.js"
import * as ReportSocket from "./internal/reportSocket.js"
import * as OutputBuffer from "./OutputBuffer.js"
import { groupMembers, isGone, ProcessTable } from "./ProcessTable.js"
import type { ProcessInfo, Signal } from "./ProcessTable.js"
import * as Watcher from "./Watcher.js"

export interface SpawnSpec {
  /** A shell command line (run with `shell -c`), or an argv run without a shell. */
  readonly command: string | ReadonlyArray<string>
  /** Default `/bin/sh`. */
  readonly shell?: string | undefined
  readonly cwd?: string | undefined
  /** Added to (and overriding) the supervisor's environment. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** `false`: `env` is the whole environment, but for corral's `CORRAL_SHELL_ID` tags. Default `true`. */
  readonly extendEnv?: boolean | undefined
  /** Tag carried as `CORRAL_SHELL_ID` by every process of the group. Generated when absent. */
  readonly shellId?: string | undefined
  /**
   * `pipe` (default) captures output into `output` and gives no stdin;
   * `inherit` passes all three through; `[stdin, stdout, stderr]` leaves
   * each `pipe` end on `group.stdio` for the caller to write or read, with
   * nothing buffered (the way a `CommandExecutor` streams a process).
   */
  readonly stdio?: "pipe" | "inherit" | RawStdio | undefined
  /** With `stdio: "pipe"`: `pipe` keeps stdin open for `writeStdin`; default `ignore` (reads get end of file). */
  readonly stdin?: "ignore" | "pipe" | undefined
  /**
   * Signal numbers the command starts with ignored, as timeout(1) passes on
   * what its caller ignored. Node's spawn resets every disposition, so a
   * one-line sh sets them and execs the command.
   */
  readonly ignoredSignals?: ReadonlyArray<number> | undefined
  /**
   * A pseudo-terminal for stdin, stdout and stderr, for programs that need
   * one (REPLs, prompts), of the size given (1 to 1000 columns and rows;
   * `resize` changes it); `true` is 120 columns by 40 rows. Its output goes
   * to `output` as stdout, and `writeStdin` types into it: the terminal's
   * line discipline echoes, and turns Ctrl-C into SIGINT for the foreground
   * job. Needs the optional package `@lydell/node-pty` (or `node-pty`);
   * `stdio` and `stdin` do not apply.
   */
  readonly tty?: boolean | TerminalSize | undefined
}

export type RawStdio = readonly [stdin: "pipe" | "inherit" | "ignore", stdout: "pipe" | "inherit", stderr: "pipe" | "inherit"]

/** The pipes of a group spawned with `RawStdio`; `null` where it said `inherit` or `ignore`, and always with `pipe`/`inherit`. */
export interface Stdio {
  readonly stdin: Writable | null
  readonly stdout: Readable | null
  readonly stderr: Readable | null
}

/** How the leader ended, and a terminal's size: declared once, as schemas, in Shell.ts. */
export type { ExitStatus, TerminalSize } from "./Shell.js"
import type { ExitStatus, TerminalSize } from "./Shell.js"
import { defaultTerminalSize, MAX_TERMINAL_SIZE } from "./internal/terminalSize.js"
import * as SpawnFailure from "./internal/spawnFailure.js"

/**
 * The directory a spawn without `cwd` runs in: this process's working
 * directory, or, where it was removed, its former path as Linux shows it
 * (`/tmp/x (deleted)`), which a spawn given it refuses as missing.
 */
export { currentDirectory } from "./internal/currentDirectory.js"

export class EmptyCommand extends Data.TaggedError("EmptyCommand")<{}> {
  override get message() {
    return "the command is empty: pass the command line to run, for example `npm run dev`"
  }
}

export class InvalidCommand extends Data.TaggedError("InvalidCommand")<{ readonly command: string; readonly reason: string }> {
  override get message() {
    return `invalid command ${JSON.stringify(this.command.slice(0, 200))}: ${this.reason}`
  }
}

export class InvalidCwd extends Data.TaggedError("InvalidCwd")<{
  readonly cwd: string
  readonly reason: "missing" | "not-a-directory" | "nul-byte" | "unusable"
  /** Why `stat` failed, for `unusable`: ENAMETOOLONG, EACCES, ELOOP... */
  readonly code?: string | undefined
}> {
  override get message() {
    // a path can be as long as a caller likes: the message stays one short line
    const cwd = this.cwd.length <= 200 ? this.cwd : `${this.cwd.slice(0, 199)}…`
    switch (this.reason) {
      case "missing":
        return `working directory ${cwd} does not exist: create it or pass an existing directory`
      case "not-a-directory":
        return `working directory ${cwd} is not a directory: pass a directory`
      case "nul-byte":
        return `working directory ${JSON.stringify(cwd)} contains a NUL byte, which no path can hold: remove it`
      case "unusable":
        return `working directory ${cwd} cannot be used (${this.code}): pass an existing directory you can enter`
    }
  }
}

export class SpawnError extends Data.TaggedError("SpawnError")<{ readonly file: string; readonly code: string; readonly cause: unknown }> {
  override get message() {
    if (this.code === "E2BIG") {
      return "the command is too large to run (E2BIG: over the system's limit for arguments and environment): write it to a script file and run that file"
    }
    return `cannot run ${this.file}: ${SpawnFailure.describe(this.code)}`
  }
}

/** A terminal's size out of bounds, at a spawn or a resize. */
export class InvalidTerminalSize extends Data.TaggedError("InvalidTerminalSize")<{ readonly cols: number; readonly rows: number }> {
  override get message() {
    return `invalid terminal size ${this.cols}x${this.rows} (columns x rows): each must be a whole number from 1 to ${MAX_TERMINAL_SIZE}`
  }
}

/** Whether `size` is one corral makes a terminal of. */
export const isTerminalSize = (size: TerminalSize): boolean =>
  [size.cols, size.rows].every((n) => Number.isInteger(n) && n >= 1 && n <= MAX_TERMINAL_SIZE)

/** `tty: true` without a pty package that loads. */
export class TtyUnavailable extends Data.TaggedError("TtyUnavailable")<{ readonly reasons: ReadonlyArray<string> }> {
  override get message() {
    return `tty: true needs the optional package ${Pty.packages[0]}, which prebuilt binaries make a plain install: ` +
      `run \`npm i ${Pty.packages[0]}\` where corral is installed, or run the command without tty (${this.reasons.join("; ")})`
  }
}

export type ProcessGroupError = EmptyCommand | InvalidCommand | InvalidCwd | InvalidTerminalSize | SpawnError | TtyUnavailable

export interface ProcessGroup {
  readonly shellId: string
  /** How the group's processes are held. */
  readonly containment: Backend
  /** The leader's pid, which is also the group and session id. */
  readonly pid: number
  /** Whether its stdin, stdout and stderr are a pseudo-terminal (`tty`). */
  readonly tty: boolean
  /**
   * The leader's start time in process-table units, when it could be read:
   * read when first asked for, while the leader is our unreaped child, and
   * the same answer after that.
   */
  readonly leaderStartTime: Effect.Effect<number | undefined>
  readonly target: StopTarget
  readonly output: OutputBuffer.OutputBuffer
  readonly stdio: Stdio
  readonly exitStatus: Effect.Effect<Option.Option<ExitStatus>>
  readonly awaitExit: Effect.Effect<ExitStatus>
  /**
   * Whether what runs on after `awaitExit` is the command's own, lingering,
   * rather than strays for the stop to end. Under pidns, once `unshare`
   * itself has died of a signal, nothing may linger: that signal ends its
   * namespace (`--kill-child`), save where it came the moment after
   * `unshare` forked, before its child had set that up, and then the init
   * and the command run on outside any group of ours. Likewise once
   * procScan's init has died of a signal: what it adopted went to PID 1,
   * out of its descendant tree.
   */
  readonly mayLinger: Effect.Effect<boolean>
  /**
   * Calls `f` once `awaitExit` is done (at once when that comes, in a
   * macrotask if it came before), never before returning; returns what
   * cancels that. For a supervisor of many groups, which then holds no
   * fiber per group while its command runs.
   */
  readonly unsafeOnExit: (f: () => void) => () => void
  /**
   * Sends `signal` to the group, as a terminal sends one to its foreground
   * job. Once corral no longer holds the leader (reaped, or on a terminal,
   * whose leader the pty package reaps), only while a member of the shell
   * is still in the group: after that, its id may be another's.
   */
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  /**
   * Writes to the leader's stdin, or closes it with `eof`; false when there is
   * none to write to (spawned without `stdin: "pipe"`, or closed already).
   * On a terminal (`tty`) `eof` types Ctrl-D, as a terminal's end of file.
   */
  readonly writeStdin: (input: { readonly text?: string | undefined; readonly eof?: boolean | undefined }) => Effect.Effect<boolean>
  /** Bytes written to the leader's stdin that its command has not read yet, held by this process; 0 on a terminal or without stdin. */
  readonly stdinWaiting: () => number
  /**
   * Resizes its terminal (`tty`), whose foreground job gets SIGWINCH; false
   * when there is none (spawned without `tty`, or its terminal closed).
   */
  readonly resize: (size: TerminalSize) => Effect.Effect<boolean, InvalidTerminalSize>
  /**
   * Stops the group; concurrent and repeated calls share the first stop's
   * report. Once begun, a stop runs to its end even if every caller is
   * interrupted: an interrupted caller returns at once, the group still goes.
   */
  readonly stop: (options?: StopOptions) => Effect.Effect<StopReport>
  readonly stopReport: Effect.Effect<Option.Option<StopReport>>
  readonly [StopStateId]: StopState
}

const StopStateId: unique symbol = Symbol.for("@corral/core/ProcessGroup/StopState")

/**
 * Where a group's stop is: not asked for yet; under way, with whoever waits
 * for its end; or over, with its report (or the defect that ended it). The
 * waiters are callbacks, not a deferred made at each claim: a deferred costs
 * 15-30 us to make in a supervisor of 200 shells, on the path of the first
 * signals of a shutdown, where no one waits for most stops.
 */
type StopPhase =
  | { readonly _tag: "NotAsked" }
  | { readonly _tag: "Stopping"; readonly waiting: Array<(exit: Exit.Exit<StopReport>) => void> }
  | { readonly _tag: "Stopped"; readonly exit: Exit.Exit<StopReport> }

/** The group's own stop: its phase, and the stop to run, with the services it needs resolved at spawn. */
interface StopState {
  phase: StopPhase
  readonly run: (targets: ReadonlyArray<StopTarget>, options?: StopOptions) => Effect.Effect<ReadonlyArray<StopReport>>
  /** Done once the group holds what a stop must reach: its command, not only the command's init. None where it always does. */
  readonly ready: Effect.Effect<void> | undefined
  /**
   * Reads whom the leader's cell holds (see `cgroupLook`, `namespaceLook`), then sends the first
   * signal to the group, where that is safe (`GroupStop.signalAtOnce`):
   * whom it reached, if it sent it.
   */
  readonly begin: (signal: Signal) => Effect.Effect<GroupStop.Reached | undefined>
  /** Before the stop proper: a leader that was outside its cell at the beginning is in it now, or gone (see `cgroupLook`). */
  readonly moveIn: () => void
  /** Its leader's exit, and its pipes closing: after these the group may have emptied (see `wakeOnAll`). */
  readonly exited: Effect.Effect<unknown>
  readonly closed: Effect.Effect<void>
  /** Calls back once, at the leader's exit (a namespace's command's); returns what cancels that (see `GroupStop.firstLook`). */
  readonly onLeaderExit: (f: () => void) => () => void
  /** Closes what the look keeps open, once the stop is over (a read after that opens it again, for the release to close). */
  readonly letGo: () => void
  /** Whether the group's cell holds no process any more: a cgroup's `populated 0`, a namespace's leader's own exit; never for procScan. */
  readonly emptied: () => boolean
  /**
   * The cell's word that it emptied, as a callback: a cgroup's `populated 0` where the kernel tells of it, an
   * init's own exit (see `GroupStop.ReachedGroup`); none for a bare procScan cell. A hint that ends a stop's pause early.
   */
  readonly onUnpopulated?: GroupStop.OnUnpopulated | undefined
  /** Whether the leader's process group still has a process, and how many its cell lists (see `GroupStop.firstLook`). */
  readonly groupAlive: Effect.Effect<boolean>
  readonly listed: () => number
  /** The grace of a stop that names none (`Limits`). */
  readonly grace: Duration.DurationInput
  /** Whether its leader is still our unreaped child, and its exit event (see `leadersReaped`). */
  readonly leader: Pick<Leader, "held" | "onExit">
}

/**
 * 48 random bits, the first twelve hex digits of a v4 UUID (the version digit
 * comes after them). `randomUUID` draws on a cache; `randomBytes` reseeds
 * OpenSSL's generator after every fork, 0.36 ms here, and a spawn is a fork.
 */
export const generateShellId = (): string => `corral-${randomUUID().replace("-", "").slice(0, 12)}`

const validate = (spec: SpawnSpec) =>
  Effect.gen(function*() {
    const parts = typeof spec.command === "string" ? [spec.command] : spec.command
    if (parts.length === 0 || parts[0]!.trim() === "") return yield* new EmptyCommand()
    const withNul = parts.find((p) => p.includes("\0"))
    if (withNul !== undefined) {
      return yield* new InvalidCommand({ command: withNul, reason: "it contains a NUL byte, which no process can receive: remove it" })
    }
    if (spec.cwd !== undefined) {
      if (spec.cwd.includes("\0")) return yield* new InvalidCwd({ cwd: spec.cwd, reason: "nul-byte" })
      let stat: fs.Stats | undefined
      try {
        stat = fs.statSync(spec.cwd, { throwIfNoEntry: false })
      } catch (cause) {
        return yield* new InvalidCwd({ cwd: spec.cwd, reason: "unusable", code: (cause as NodeJS.ErrnoException).code ?? "UNKNOWN" })
      }
      if (stat === undefined) return yield* new InvalidCwd({ cwd: spec.cwd, reason: "missing" })
      if (!stat.isDirectory()) return yield* new InvalidCwd({ cwd: spec.cwd, reason: "not-a-directory" })
    }
    if (isTty(spec) && (spec.stdio === "inherit" || Array.isArray(spec.stdio))) {
      return yield* new InvalidCommand({
        command: parts.join(" "),
        reason: "tty gives the command a terminal for stdin, stdout and stderr, so stdio cannot say otherwise: drop one of them"
      })
    }
    if (typeof spec.tty === "object" && !isTerminalSize(spec.tty)) return yield* new InvalidTerminalSize(spec.tty)
  })

const isTty = (spec: SpawnSpec) => spec.tty !== undefined && spec.tty !== false

/** The outer shells' ids stay with a nested corral's processes, so an outer stop still finds them. */
const shellIdChain = (env: Readonly<Record<string, string | undefined>>, shellId: string) =>
  [...(env.CORRAL_SHELL_IDS ?? env.CORRAL_SHELL_ID ?? "").split(","), shellId].filter((id) => id !== "").join(",")

/** Where a wrapper execs the command, spawn itself cannot say that the command is missing: found out first (see `internal/executable`). */
const checkExecutable = (file: string, env: Readonly<Record<string, string | undefined>>, cwd: string | undefined) => {
  const code = Executable.missing(file, env.PATH, cwd)
  return code === undefined ? undefined : new SpawnError({ file, code, cause: undefined })
}

/** `file args` with `signals` ignored: an ignored disposition is the one thing exec keeps. */
const ignoring = (signals: ReadonlyArray<number>, file: string, args: ReadonlyArray<string>): readonly [string, ReadonlyArray<string>] =>
  signals.length === 0 ? [file, args] : ["/bin/sh", ["-c", `trap '' ${signals.join(" ")}; exec "$@"`, "sh", file, ...args]]

/** Where a leader's output, exit and the end of its output go. */
interface Sinks {
  readonly output: OutputBuffer.OutputBuffer
  /** Completed by `exited` alone. */
  readonly exit: Deferred.Deferred<ExitStatus>
  /** The leader's exit status, first come: completes `exit` and tells `onExited`'s listeners. */
  readonly exited: (status: ExitStatus) => void
  /**
   * Calls back once `exit` is complete (at its completion, or in a macrotask if it came before),
   * never before returning, as `Leader.onExit`: for the stop's look, which waits without a fiber.
   */
  readonly onExited: (f: () => void) => () => void
  /** Every holder of the output closed it: nothing more will come. Completed by `markClosed` alone. */
  readonly closed: Deferred.Deferred<void>
  readonly markClosed: () => void
  /** Whether `closed` is complete, asked without a fiber (a group's release). */
  readonly isClosed: () => boolean
  /** corral's init forked the command (pidns, procScan's): only where an init reports (`Cell.reportsExit`). */
  readonly forked: Deferred.Deferred<void> | undefined
}

/** `Sinks`' exit: its listeners are kept only until the exit is known. */
const exitSink = (): Pick<Sinks, "exit" | "exited" | "onExited"> => {
  const exit = Deferred.unsafeMake<ExitStatus>(FiberId.none)
  let listeners: Array<() => void> | undefined = []
  return {
    exit,
    exited: (status) => {
      if (listeners === undefined) return
      const waiting = listeners
      listeners = undefined
      Deferred.unsafeDone(exit, Effect.succeed(status))
      waiting.forEach((f) => f())
    },
    onExited: (f) => {
      if (listeners === undefined) {
        const later = setImmediate(f)
        return () => clearImmediate(later)
      }
      const listener = () => f()
      listeners.push(listener)
      return () => {
        const at = listeners?.indexOf(listener) ?? -1
        if (at >= 0) listeners!.splice(at, 1)
      }
    }
  }
}

/** `Sinks`' end of output. */
const closedSink = (): Pick<Sinks, "closed" | "markClosed" | "isClosed"> => {
  const closed = Deferred.unsafeMake<void>(FiberId.none)
  let done = false
  return {
    closed,
    markClosed: () => {
      done = true
      Deferred.unsafeDone(closed, Effect.void)
    },
    isClosed: () => done
  }
}

/** The group's first process, however it was started. */
interface Leader {
  readonly pid: number
  readonly stdio: Stdio
  readonly writeStdin: ProcessGroup["writeStdin"]
  readonly stdinWaiting: ProcessGroup["stdinWaiting"]
  /** Resizes its terminal, if it has one open: false if not. */
  readonly resize: (size: TerminalSize) => boolean
  /** Stops reading output: what the dead wrote has arrived, or never will. */
  readonly closeOutput: () => void
  /** Whether it is our child, not yet reaped: while it is, no other process can have its pid, or its group's id. */
  readonly held: () => boolean
  /** Whether it has been reaped after an exit of its own, not a signal's. */
  readonly exitedByItself: () => boolean
  /** Whether it has been reaped after a signal ended it. */
  readonly killed: () => boolean
  /** Calls back once at its exit (or soon, if it has exited), never before returning; returns what cancels that. */
  readonly onExit: (f: () => void) => () => void
}

/** The command as the cell runs it, with the environment every member carries, checked as execvp would where spawn cannot tell. */
const prepare = (spec: SpawnSpec, shellId: string, cell: Cell, checkAlways: boolean, report?: string) => {
  const [command, commandArgs] = typeof spec.command === "string"
    ? [spec.shell ?? "/bin/sh", ["-c", spec.command]]
    : [spec.command[0]!, spec.command.slice(1)]
  const env: Record<string, string | undefined> = spec.extendEnv === false ? { ...spec.env } : { ...process.env, ...spec.env }
  const ignored = (spec.ignoredSignals ?? []).filter((n) => Number.isInteger(n) && n > 0)
  // a bare procScan cell spawns the command itself, and spawn says what is missing; a wrapper could only exit
  const missing = checkAlways || cell.backend !== "procScan" || cell.reaper || ignored.length > 0 ? checkExecutable(command, env, spec.cwd) : undefined
  const [file, args] = cell.wrap(...ignoring(ignored, command, commandArgs), report)
  // the tags set on the one copy of the environment a spawn makes, not on a second
  env.CORRAL_SHELL_IDS = shellIdChain(env, shellId)
  env.CORRAL_SHELL_ID = shellId
  return { command, file, args, env, missing }
}

/** Spawns the leader on pipes, synchronously: only a spawn that failed waits, for its `error` event. */
const pipeLeader = (spec: SpawnSpec, shellId: string, cell: Cell, sinks: Sinks) =>
  Effect.suspend((): Effect.Effect<Leader, SpawnError> => {
    const { args, command, env, file, missing } = prepare(spec, shellId, cell, false)
    if (missing !== undefined) return Effect.fail(missing)
    let child: ChildProcess
    try {
      child = spawnChild(file, args, {
        cwd: spec.cwd,
        env,
        // a new session and group: the whole tree can be signalled, and job
        // control groups stay findable by session id
        detached: true,
        stdio: [
          ...(Array.isArray(spec.stdio)
            ? spec.stdio
            : spec.stdio === "inherit"
            ? ["inherit", "inherit", "inherit"] as const
            : [spec.stdin === "pipe" ? "pipe" : "ignore", "pipe", "pipe"] as const),
          // where the leader is not the command, the command's own exit status arrives on fd 3
          ...(cell.reportsExit ? ["pipe"] as const : [])
        ]
      })
    } catch (cause) {
      // some failures (E2BIG for a command too large) are thrown at once instead of emitted
      return Effect.fail(new SpawnError({ file: command, code: (cause as NodeJS.ErrnoException).code ?? "UNKNOWN", cause }))
    }
    // a pid means the exec succeeded (spawn waits for it): the `spawn` event a tick later would only delay the start
    if (child.pid !== undefined) return Effect.succeed(connectChild(child, spec, sinks))
    // emitted in the next tick: listened to before that, in this one
    return Effect.async<never, SpawnError>((resume) => {
      child.once("error", (cause: NodeJS.ErrnoException) => {
        // execve says EACCES for a directory too: a lookup of the path says which it was
        const code = cause.code === "EACCES" ? Executable.missing(command, env.PATH, spec.cwd) ?? cause.code : cause.code
        resume(Effect.fail(new SpawnError({ file: command, code: code ?? "UNKNOWN", cause })))
      })
    })
  })

const connectChild = (child: ChildProcess, spec: SpawnSpec, { exited, forked, markClosed, output }: Sinks): Leader => {
  const raw = Array.isArray(spec.stdio)
  if (!raw) {
    child.stdout?.on("data", (bytes: Uint8Array) => output.append("stdout", bytes))
    child.stderr?.on("data", (bytes: Uint8Array) => output.append("stderr", bytes))
  }
  // a reader that is gone (EPIPE) is the command's business: a writer hears of it while it writes (its own
  // listener, its write's callback), and one interrupted with a write in flight hears nothing, where an
  // 'error' with no listener would end this process (a pipeline's feeder when `head` has had enough)
  child.stdin?.on("error", () => undefined)
  const report = child.stdio[3]
  let heard = false
  report?.on("data", reportReader({ exited, forked }, () => (heard = true)))
  child.once("exit", (code, signal) => {
    const status = toExitStatus(code, signal)
    if (report == null || heard || signal !== null) return exited(status)
    // the init says `forked` the moment the command's process exists: a wrapper that exited by itself
    // with no word from it before its channel closed never ran the command (`unshare` could not make
    // the namespace, or fork the init), and its code is not the command's
    onceClosed(report, () => exited(heard ? status : NEVER_RAN))
  })
  onOutputEnd(child, () => {
    markClosed()
    output.unsafeEnd()
  })
  return {
    pid: child.pid!,
    stdio: raw ? { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr } : { stdin: null, stdout: null, stderr: null },
    writeStdin: ({ eof, text }) =>
      Effect.async<boolean>((resume) => {
        const stdin = child.stdin
        if (stdin === null || !stdin.writable) return resume(Effect.succeed(false))
        // queued at once, the end of file behind the text: a caller that stops waiting leaves both to go, in order
        const taken = () => resume(Effect.succeed(true))
        const some = text !== undefined && text !== ""
        if (some) stdin.write(text, eof === true ? undefined : taken)
        if (eof === true) stdin.end(taken)
        else if (!some) taken()
      }),
    stdinWaiting: () => child.stdin?.writableLength ?? 0,
    held: () => child.exitCode === null && child.signalCode === null,
    exitedByItself: () => child.exitCode !== null,
    killed: () => child.signalCode !== null,
    onExit: (f) => {
      // never called back before this returns: a caller may not be ready for it
      if (child.exitCode !== null || child.signalCode !== null) {
        const later = setImmediate(f)
        return () => clearImmediate(later)
      }
      child.once("exit", f)
      return () => child.off("exit", f)
    },
    resize: () => false,
    closeOutput: () => {
      child.stdout?.destroy()
      child.stderr?.destroy()
      child.stdio[3]?.destroy()
    }
  }
}

/**
 * Calls `f` once every holder of the child's output pipes has closed them:
 * at the end of each pipe (a pipe closed without an end, destroyed or
 * broken, counts as ended), or at the child's `close` where it has none.
 * Not at the child's `close` always: that also waits for the leader's exit,
 * and for Node to close the pipes' handles, which came 5-12 ms after the
 * last end when 200 shells were stopped at once.
 */
const onOutputEnd = (child: ChildProcess, f: () => void) => {
  const pipes = [child.stdout, child.stderr].filter((pipe): pipe is Readable => pipe !== null)
  if (pipes.length === 0) return void child.once("close", f)
  let open = pipes.length
  for (const pipe of pipes) {
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      if (--open === 0) f()
    }
    pipe.once("end", end)
    pipe.once("close", end)
  }
}

/**
 * The leader on a pseudo-terminal. The pty package forks it into a session
 * of its own, as `detached` does, so the cell's wrapper joins it to the
 * cgroup before the command's first instruction exactly as on pipes. An
 * init (pidns's, procScan's) reports on the socket at `report`, as the terminal
 * passes it no fd 3.
 */
const ptyLeader = (spec: SpawnSpec, shellId: string, cell: Cell, { exited, markClosed, output }: Sinks, report: string) =>
  Effect.gen(function*() {
    const pty = yield* Effect.mapError(Pty.load, (missing) => new TtyUnavailable({ reasons: missing.reasons }))
    const { args, command, env, file, missing } = prepare(spec, shellId, cell, true, report)
    if (missing !== undefined) return yield* missing
    const size = typeof spec.tty === "object" ? spec.tty : defaultTerminalSize
    const term = yield* Effect.try({
      try: () => pty.spawn(file, [...args], { ...size, cwd: spec.cwd, env, encoding: null, name: env.TERM ?? "xterm-256color" }),
      catch: (cause) => new SpawnError({ file: command, code: (cause as NodeJS.ErrnoException).code ?? "UNKNOWN", cause })
    })
    let open = true
    let killed = false
    const append = (data: Buffer | string) => output.append("stdout", typeof data === "string" ? Buffer.from(data) : data)
    term.onData(append)
    Pty.onClosing(term, () => {
      open = false
      Pty.readRest(term, append)
    })
    term.onExit(({ exitCode, signal }) => {
      const name = signal === undefined || signal === 0 ? undefined : signalNames.get(signal)
      killed = name !== undefined
      exited(name !== undefined ? { _tag: "Signaled", signal: name } : { _tag: "Exited", code: exitCode })
    })
    // node-pty ends the output when the terminal's last holder closes it, or 200 ms after the leader's exit
    Pty.onClose(term, () => {
      open = false
      markClosed()
      output.unsafeEnd()
    })
    return {
      pid: term.pid,
      stdio: { stdin: null, stdout: null, stderr: null },
      writeStdin: ({ eof, text }) =>
        Effect.sync(() => {
          if (!open) return false
          // at a terminal, end of file is Ctrl-D: closing the master would hang the session up instead
          const typed = (text ?? "") + (eof === true ? "\u0004" : "")
          if (typed !== "") term.write(typed)
          return true
        }),
      stdinWaiting: () => 0,
      resize: ({ cols, rows }) => {
        if (!open) return false
        term.resize(cols, rows)
        return true
      },
      closeOutput: () => Pty.closeMaster(term),
      // the pty package reaps on a thread of its own, before its exit callback: no moment is known when it still holds the pid
      held: () => false,
      exitedByItself: () => false,
      killed: () => killed,
      onExit: (f) => {
        const listener = term.onExit(f)
        return () => listener.dispose()
      }
    } satisfies Leader
  })

const toExitStatus = (code: number | null, signal: NodeJS.Signals | null): ExitStatus =>
  signal !== null ? { _tag: "Signaled", signal } : { _tag: "Exited", code: code ?? 0 }

const signalNames = new Map(Object.entries(os.constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]))

/**
 * Reads what a pidns init reports, chunk by chunk (chunks may split or join
 * lines): `forked`, then the command's raw wait status.
 */
const reportReader = ({ exited, forked }: Pick<Sinks, "exited" | "forked">, heard: () => void = () => undefined) => {
  let pending = ""
  return (chunk: Buffer) => {
    const lines = (pending + chunk.toString("latin1")).split("\n")
    pending = lines.pop()!
    for (const line of lines) {
      heard()
      if (line !== "forked") exited(fromWaitStatus(Number(line)))
      else if (forked !== undefined) Deferred.unsafeDone(forked, Effect.void)
    }
  }
}

/**
 * The exit of a shell whose command never ran because its containment's
 * wrapper failed first: 125, as timeout(1) exits when it fails itself, and as
 * the PID-namespace init exits when it cannot fork the command.
 */
const NEVER_RAN: ExitStatus = { _tag: "Exited", code: 125 }

const onceClosed = (stream: Readable | Writable, f: () => void) => {
  if (stream.closed) setImmediate(f)
  else stream.once("close", f)
}

/** A raw wait(2) status, as the PID-namespace init reports it. */
const fromWaitStatus = (status: number): ExitStatus => {
  const signal = signalNames.get(status & 127)
  return (status & 127) !== 0 && signal !== undefined ? { _tag: "Signaled", signal } : { _tag: "Exited", code: (status >> 8) & 255 }
}

/** Announces the group to the watcher before it exists (by tag and cell), and withdraws it after its stop: never unwatched. */
const announce = (
  watcher: Watcher.Watcher["Type"] | undefined,
  releases: Releases.Releases,
  shellId: string,
  held: Omit<StopTarget, "pgid" | "sid">
) =>
  watcher === undefined ? Effect.void : Effect.map(
    watcher.add(shellId, { pgid: -1, sid: -1, ...held }),
    () => releases.add(() => watcher.unsafeRemove(shellId))
  )

/**
 * Starts the leader. The scope closes after the group's stop: its release
 * gives the output a moment to deliver what the dead wrote, then ends it
 * whatever still holds it. A release runs uninterruptibly, and a timeout
 * cannot cut short an uninterruptible wait: made interruptible, or a
 * process outside the shell holding a pipe would hold the scope's close for
 * as long as it lives. Already closed (the usual case once the stop is
 * over), there is nothing to wait for.
 */
const startLeader = (start: Effect.Effect<Leader, SpawnError | TtyUnavailable>, releases: Releases.Releases, { closed, isClosed, output }: Sinks) =>
  // started and its release registered in one step, as acquireRelease does
  Effect.uninterruptible(Effect.map(start, (leader) => {
    const end = () => {
      leader.closeOutput()
      output.unsafeEnd()
    }
    releases.add(() => isClosed() ? end() : Effect.zipRight(bounded(Deferred.await(closed), Duration.millis(200)), Effect.sync(end)))
    return leader
  }))

/**
 * The leader, if it still runs once its stop is over: that stop missed a
 * member the leader waits for (a namespace's init waits for every process
 * in it), or could not end it. Still our unreaped child, its pid is ours to
 * signal; under pidns its SIGKILL ends the whole namespace (`unshare
 * --kill-child`), so nothing of the shell outlives its scope, and a cell's
 * release strikes what is left in the cell. One that died a moment ago is
 * reaped at its exit event, which is given `REAPED_WITHIN_MS` of real time
 * (the kernel's, not the program's clock) to come.
 */
const endStray = (table: ProcessTable["Type"], shellId: string, leader: Leader): Effect.Effect<void> | undefined =>
  !leader.held() ? undefined : Effect.zipRight(
    leadersReaped([leader]),
    Effect.suspend(() => !leader.held() ? Effect.void : Effect.flatMap(table.lookup(leader.pid), (found) => {
      // told only where the table sees it alive: a zombie not yet reaped is no news
      if (Option.isSome(found) && !isGone(found.value)) {
        process.emitWarning(`corral: the leader of shell ${shellId} (pid ${leader.pid}) still ran after its stop; killed it (SIGKILL)`)
      }
      return table.signal(leader.pid, "SIGKILL")
    }))
  )

/** How long a leader found unreaped at its release has for its exit event to come before it is taken to run. */
const REAPED_WITHIN_MS = 100

/** What a stop reads of the group's cell before its stop proper (see `GroupStop.firstLook`). */
type Look = Pick<StopState, "begin" | "moveIn" | "letGo" | "onLeaderExit" | "emptied" | "onUnpopulated" | "listed">

/** A cell that lists nothing (procScan): the stop proper finds the members. */
const noLook = (leader: Leader): Look => ({
  begin: () => Effect.succeed(undefined),
  moveIn: () => {},
  letGo: () => {},
  onLeaderExit: leader.onExit,
  emptied: () => false,
  listed: () => 0
})

/**
 * A cgroup cell's look. Membership by cgroup is exact
 * only once the leader is in. The wrapper joins as its first instruction,
 * once it is scheduled, then execs the command; until then the leader is
 * the wrapper alone, which has forked nothing. So a stop that finds the
 * leader outside (a stop at once after the start) signals its group all
 * the same, counts it among those reached, and trusts the cell's emptiness
 * only after the leader's exit; the leader is moved in from outside only if
 * the stop proper comes to read the cell while the leader still lives and
 * has not joined. Moving a process takes the kernel's cgroup write lock:
 * 0.7 ms here (5 ms at worst under load) when every start did it in its
 * next macrotask, and 1.5 ms (median) on the path of a stop at once after
 * the start, where half the bench's single stops found the wrapper not
 * joined yet. That macrotask only opens the cell's listing and its
 * `cgroup.events`, kept for the shell's life: the stop reads the listing
 * just before its first signal, in one syscall, and that reading is the one
 * the first signal is sent on; the first look reads `cgroup.events` at once
 * after it, then one `pread` too (a `sleep`'s stop: 2.30 ms before, 2.14
 * after, medians of 8 alternating runs). A terminal's leader is moved in
 * that macrotask: the pty package reaps it whenever it likes, so later its
 * pid may be another's. A stop begun before that macrotask (a registry's
 * shutdown at once after 200 starts) has opened both files itself.
 *
 * The listing is given once, and only while the leader is our unreaped
 * child: then its group id is still ours to signal (see
 * `GroupStop.signalAtOnce`).
 */
const cgroupLook = (
  table: ProcessTable["Type"],
  dir: string,
  listing: KeptFiles,
  leader: Leader,
  tty: boolean,
  target: () => StopTarget
): Look => {
  const list = () => Cgroup.ownProcs(dir, listing.readOr)
  const onUnpopulated: GroupStop.OnUnpopulated = (f) => Cgroup.onUnpopulated(dir, f, listing.readOr)
  let asked = false
  let outside = false
  let ttyMoved = false
  // in that macrotask, or at a stop's beginning if the stop comes first
  const moveTty = () => {
    if (tty && !ttyMoved) Cgroup.join(dir, leader.pid)
    ttyMoved = true
  }
  setImmediate(() => {
    moveTty()
    // a stop that came first has opened both already, and reads them as it needs
    if (asked) return
    list()
    Cgroup.unpopulated(dir, listing.readOr)
  })
  /** Once: whom the cell holds, the leader counted in; undefined where the first signal may not go to the group. */
  const reachable = () => {
    moveTty()
    if (asked || tty || !leader.held()) return undefined
    asked = true
    const listed = list()
    if (listed.includes(leader.pid)) return listed
    outside = true
    return [...listed, leader.pid]
  }
  return {
    begin: (signal) =>
      Effect.suspend(() => {
        const listed = reachable()
        return listed === undefined ? Effect.succeed(undefined) : GroupStop.signalAtOnce(table, target(), signal, new Set(listed))
      }),
    moveIn: () => {
      if (outside && leader.held() && !list().includes(leader.pid)) Cgroup.join(dir, leader.pid)
      outside = false
    },
    // the listing's two files, kept for the stop: closed as it ends, not among the releases of a shutdown's 200 scopes
    letGo: listing.close,
    onLeaderExit: leader.onExit,
    // Not while the leader is our unreaped child: outside at the beginning, the cell's emptiness says
    // nothing of it; inside, `populated 0` comes when its last member has left the cgroup, in the
    // middle of its exit, before it is a zombie, and a stop that returned then found the leader
    // still running (state R, exiting) twice in 1500 bench stops. Its exit event comes soon after.
    emptied: () => !leader.held() && Cgroup.unpopulated(dir, listing.readOr),
    onUnpopulated,
    listed: () => list().length
  }
}

/**
 * A PID-namespace cell's look, through the namespace's own /proc, which
 * `unshare --mount-proc` mounted and the leader's root reaches from
 * outside: one readdir lists the shell's processes however busy the host,
 * where a scan of the host's table reads every process on it. That /proc
 * is the shell's to change (a root command may mount another there), so
 * what it lists only counts, paces the look and says whom the first signal
 * reached (a lie there misleads the stop about the liar's own processes
 * alone); no stop ends on it. The namespace is empty
 * when its leader exits by itself, and not before: `unshare` waits for its
 * init, whose exit waits for every process of its namespace. Once the
 * command's process exists (two listed: the init and it), the first
 * signal goes to the leader's group, which holds it and whatever it did
 * not move elsewhere; the init and `unshare` ignore it.
 */
const namespaceLook = (
  table: ProcessTable["Type"],
  leader: Leader,
  onExited: Sinks["onExited"],
  target: () => StopTarget
): Look => {
  const inside = () => Pidns.ownProcs(leader.pid)
  return {
    begin: (signal) =>
      Effect.suspend(() => {
        const listed = leader.held() && GroupStop.pidnsLeaderSurvives(signal) && Pidns.readsNamespaceIds() ? inside() : undefined
        if (listed === undefined || listed.length < 2) return Effect.succeed(undefined)
        return GroupStop.signalAtOnce(table, target(), signal, Pidns.reached(leader.pid, listed))
      }),
    ...endsWithItsInit(leader, onExited),
    listed: () => inside()?.length ?? 0
  }
}

/**
 * What a look needs where an init of corral's stands between the leader and the command
 * (pidns's `unshare` and init, procScan's init): the init reports the command's exit, and the
 * leader exits by itself only once every process the shell holds is gone.
 */
const endsWithItsInit = (
  leader: Leader,
  onExited: Sinks["onExited"]
): Pick<Look, "moveIn" | "letGo" | "onLeaderExit" | "emptied" | "onUnpopulated"> => ({
  moveIn: () => {},
  letGo: () => {},
  // the command's exit, as the init reports it: what is left then is dying of the signal, or outlives it
  onLeaderExit: onExited,
  emptied: leader.exitedByItself,
  // the init's own exit is the cell's word that it emptied
  onUnpopulated: leader.onExit
})

/**
 * The look of a shell led by procScan's init (ADR 58), which reaps every
 * process the command leaves, a `setsid` escaper included, and exits only
 * once none is left: its exit says the shell is empty, as `unshare`'s says
 * a namespace is. The first signal goes to the leader's group at once,
 * before the stop proper is set up; whom it reached is read just before,
 * from a scan of the processes born since the shell's mark, as a cell's
 * listing is read. The init ignores the signal (see Containment's init),
 * and the group's id is ours while the init is our unreaped child. Before
 * the init said `forked`, the signal could reach the init alone: then, as
 * on a terminal or with a signal that would end the init, the stop proper
 * sends it.
 */
const initLook = (
  table: ProcessTable["Type"],
  cell: Cell,
  leader: Leader,
  { forked, onExited }: Pick<Sinks, "forked" | "onExited">,
  tty: boolean,
  target: () => StopTarget
): Look => ({
  begin: (signal) =>
    tty || forked === undefined || !leader.held() || typeof signal === "number" || !leaderSurvives(cell, signal)
      ? Effect.succeed(undefined)
      : Effect.flatMap(Deferred.isDone(forked), (done) => done ? signalGroupAtOnce(table, target(), leader.pid, signal) : Effect.succeed(undefined)),
  ...endsWithItsInit(leader, onExited),
  // nothing to count without a scan: the look hands a group that outlives its command on after `STEADY_MS`
  listed: () => 0
})

/** The first signal to the init's group, with whom it reached: its live members, the init counted in but not among the command's. */
const signalGroupAtOnce = (table: ProcessTable["Type"], target: StopTarget, init: number, signal: Signal) =>
  Effect.flatMap(target.pidMark === undefined ? table.scan : table.scanSince(target.pidMark), (all) => {
    const members = new Set(groupMembers(all, target.pgid).map((p) => p.pid))
    members.add(init)
    const reached: GroupStop.Reached = {
      size: members.size - 1,
      has: (pid) => members.has(pid),
      // the scan read each of them: none is a member the stop must assume until it reads it, as a cell's listed pids are
      [Symbol.iterator]: () => [][Symbol.iterator]()
    }
    return GroupStop.signalAtOnce(table, target, signal, reached)
  })

/**
 * A signal to the leader's group, while its id is surely the shell's: while
 * the leader is our unreaped child, or else while a member of the shell is
 * still in that group (see `membersInGroup`). Otherwise no one gets it.
 */
const signalGroup = (table: ProcessTable["Type"], cell: Cell, leader: Leader, target: StopTarget) =>
(signal: NodeJS.Signals): Effect.Effect<void> =>
  leader.held()
    ? sendToGroup(table, cell, target.pgid, signal, Effect.map(table.scan, (all) => groupMembers(all, target.pgid)))
    : Effect.flatMap(membersInGroup(table, target), (members) =>
      members.length === 0 ? Effect.void : sendToGroup(table, cell, target.pgid, signal, Effect.succeed(members)))

/**
 * A pidns leader (`unshare`) dies of most signals, and its namespace at once
 * with it (`--kill-child`), before the command could act on one; procScan's
 * init ignores all but SIGKILL, which would hand what the command orphaned
 * to PID 1. Those go to every other member of the group by pid, as
 * `members` finds them.
 */
const sendToGroup = (
  table: ProcessTable["Type"],
  cell: Cell,
  pgid: number,
  signal: NodeJS.Signals,
  members: Effect.Effect<ReadonlyArray<ProcessInfo>>
): Effect.Effect<void> =>
  leaderSurvives(cell, signal)
    ? Effect.asVoid(table.signal(-pgid, signal))
    : Effect.flatMap(members, (found) =>
      Effect.forEach(found.filter((p) => p.pid !== pgid), (p) => table.signal(p.pid, signal), { discard: true }))

/** Whether the cell's leader may get `signal` with the rest of its group (see `sendToGroup`). */
const leaderSurvives = (cell: Cell, signal: NodeJS.Signals): boolean =>
  cell.backend === "pidns" ? GroupStop.pidnsLeaderSurvives(signal) : !cell.reaper || signal !== "SIGKILL"

/**
 * The shell's members in its leader's group, where the leader may have been
 * reaped (a lingering shell; a terminal's, which the pty package reaps when
 * it likes). Once the last member has left that group or died, the kernel
 * may hand its id to another's new group. The members are found as a stop
 * finds them; one seen in the group keeps the id the shell's until the
 * signal goes.
 */
const membersInGroup = (table: ProcessTable["Type"], target: StopTarget) =>
  Effect.acquireUseRelease(
    MembershipImpl.make(table, [target]),
    (membership) => Effect.map(membership.scan, () => membership.groups[0]!.live.filter((p) => p.pgid === target.pgid)),
    (membership) => membership.release
  )

const startTimeOf = (table: ProcessTable["Type"], pid: number) =>
  Effect.map(table.lookup(pid), (found) => Option.getOrUndefined(Option.map(found, (p) => p.startTime)))

/**
 * The leader's start time, read when first asked for (by the journal, a
 * macrotask after the start), not on the start's path: a read of /proc
 * costs three syscalls. Read only while the leader is our unreaped child,
 * when its pid cannot be another process's; undefined after that.
 */
const startTimeWhenAsked = (table: ProcessTable["Type"], leader: Leader): Effect.Effect<number | undefined> => {
  let known: Option.Option<number | undefined> = Option.none()
  return Effect.suspend(() => {
    if (Option.isSome(known)) return Effect.succeed(known.value)
    if (!leader.held()) return Effect.succeed(undefined)
    return Effect.tap(startTimeOf(table, leader.pid), (startTime) => Effect.sync(() => (known = Option.some(startTime))))
  })
}

/** The group's value around its running leader, its sinks and its stop state. */
const assemble = (
  base: {
    readonly shellId: string
    readonly cell: Cell
    readonly tty: boolean
    readonly held: Omit<StopTarget, "pgid" | "sid">
    readonly leaderStartTime: Effect.Effect<number | undefined>
    readonly table: ProcessTable["Type"]
  },
  leader: Leader,
  { exit, onExited, output }: Pick<Sinks, "exit" | "onExited" | "output">,
  stopState: StopState
): ProcessGroup => {
  const target: StopTarget = { pgid: leader.pid, sid: leader.pid, ...base.held }
  const group: ProcessGroup = {
    shellId: base.shellId,
    containment: base.cell.backend,
    pid: leader.pid,
    tty: base.tty,
    leaderStartTime: base.leaderStartTime,
    target,
    output,
    stdio: leader.stdio,
    exitStatus: Deferred.poll(exit).pipe(Effect.flatMap(Option.match({ onNone: () => Effect.succeedNone, onSome: Effect.asSome }))),
    awaitExit: Deferred.await(exit),
    mayLinger: Effect.sync(() => (base.cell.backend !== "pidns" && !base.cell.reaper) || !leader.killed()),
    unsafeOnExit: onExited,
    signal: signalGroup(base.table, base.cell, leader, target),
    writeStdin: leader.writeStdin,
    stdinWaiting: leader.stdinWaiting,
    resize: (size) => isTerminalSize(size) ? Effect.sync(() => leader.resize(size)) : Effect.fail(new InvalidTerminalSize(size)),
    stop: (options) => Effect.map(stopAll([group], options), (reports) => reports[0]!),
    stopReport: Effect.sync(() => Option.fromNullable(stoppedReport(stopState))),
    [StopStateId]: stopState
  }
  return group
}

/**
 * Done once the leader leads a session of its own, or is gone (at most a
 * second). The pty package returns from its fork before the child has made
 * its session, unlike a pipe spawn, which returns once the child has
 * exec'd. Until then the leader is in our own group and session, where no
 * signal of corral's goes: a stop at once would scan no member (or, in a
 * cgroup, one it cannot signal) and return while the command starts, or
 * wait out the grace.
 */
const leadsItsSession = (table: ProcessTable["Type"], pid: number): Effect.Effect<void> =>
  Effect.asVoid(bounded(
    Effect.repeat(table.lookup(pid), {
      schedule: Schedule.spaced(Duration.millis(1)),
      until: Option.match({ onNone: () => true, onSome: (p) => p.sid === pid || isGone(p) })
    }),
    Duration.seconds(1)
  ))

/** Spawns `spec` in a new group; closing the scope stops the group. */
export const spawn = Effect.fn("ProcessGroup.spawn")(function*(spec: SpawnSpec) {
  const services = yield* spawnServices
  return yield* Effect.flatMap(Releases.make, (releases) => spawnWith(services, spec, releases))
})

/** What a spawn uses: resolved once by `spawner`. */
interface Services {
  readonly table: ProcessTable["Type"]
  readonly limits: LimitsShape
  readonly containment: Containment["Type"]
  /** Provided (a registry with crash safety): every group is announced to it before it exists. */
  readonly watcher: Watcher.Watcher["Type"] | undefined
}

const spawnServices: Effect.Effect<Services, never, ProcessTable | Limits | Containment> = Effect.all({
  table: ProcessTable,
  limits: Limits,
  containment: Containment,
  watcher: Effect.map(Effect.serviceOption(Watcher.Watcher), Option.getOrUndefined)
})

/**
 * A group whose holder releases it, in place of a scope: a holder of many
 * groups (the registry) releases them all in one pass at its shutdown
 * (`releaseAll`), where closing a scope per group cost 200 groups 8 ms more
 * (ADR 48).
 */
export interface OwnedGroup {
  readonly group: ProcessGroup
  /** What closing `spawn`'s scope does: the group's stop, if none has run, then a release of all it holds. Once, whoever asks first. */
  readonly release: Effect.Effect<void>
  /** The same releases, as `releaseAll` runs them with other groups'. */
  readonly releases: Releases.Owned
}

/** Releases many groups in one pass: what each can let go of at once first, then what is left to wait for. */
export const releaseAll = (groups: ReadonlyArray<OwnedGroup>): Effect.Effect<void> => Releases.runAll(groups.map((g) => g.releases))

/**
 * `spawn` with its services resolved once, for a caller that spawns many
 * (the registry): no lookup of four services at each spawn, and no span of
 * its own, as the caller's start has one. Each group is its caller's to
 * release; one whose spawn fails or is interrupted is released at once.
 */
export const spawner: Effect.Effect<
  (spec: SpawnSpec) => Effect.Effect<OwnedGroup, ProcessGroupError>,
  never,
  ProcessTable | Limits | Containment
> = Effect.map(spawnServices, (services) => (spec) =>
  Effect.suspend(() => {
    const releases = Releases.unsafeMakeOwned()
    const release = Releases.run(releases)
    return spawnWith(services, spec, releases).pipe(
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : release),
      Effect.map((group): OwnedGroup => ({ group, release, releases }))
    )
  }))

const spawnWith = (services: Services, spec: SpawnSpec, releases: Releases.Releases) => Effect.gen(function*() {
  yield* validate(spec)
  const { containment, limits, table } = services
  const shellId = spec.shellId ?? generateShellId()
  // acquired first, released last: the cell outlives the stop
  const cell = yield* Effect.uninterruptible(Effect.tap(containment.cell(shellId), (cell) => releases.add(cell.release)))
  const bornAfter = (yield* table.now) - 1
  // a cgroup lists its members; a scan for them need not read processes older than the shell
  const pidMark = cell.cgroup === undefined ? yield* table.mark : undefined
  const held = {
    startTime: bornAfter,
    shellId,
    cgroup: cell.cgroup,
    pidns: cell.backend === "pidns" || undefined,
    reaper: cell.reaper || undefined,
    pidMark
  } as const
  yield* announce(services.watcher, releases, shellId, held)
  // made in one step: completed from the child's callbacks, by no fiber
  const sinks = yield* Effect.sync(() => unsafeMakeSinks(limits, cell))
  const tty = isTty(spec)
  // on a terminal, the init's report channel is a socket, closed after the leader's output (released first)
  const report = tty && cell.reportsExit
    ? yield* Effect.uninterruptible(Effect.map(ReportSocket.listen(reportReader(sinks)), (socket) => {
      releases.add(() => socket?.close())
      return socket
    }))
    : undefined
  const start: Effect.Effect<Leader, SpawnError | TtyUnavailable> = tty
    // without a socket, no channel at all: whatever fd 3 the terminal's child inherited is not the init's
    ? ptyLeader(spec, shellId, cell, sinks, report?.path ?? "")
    : pipeLeader(spec, shellId, cell, sinks)
  // acquired before the leader: released after its stop; opens nothing until the join reads it
  const listing = cell.cgroup === undefined ? undefined : makeKeptFiles(2)
  if (listing !== undefined) releases.add(listing.close)
  const leader = yield* startLeader(start, releases, sinks)
  // released after the stop, before the output: what the stop left running
  releases.add(() => endStray(table, shellId, leader))
  const pid = leader.pid
  // read at once where a scan finds the members (see `StopTarget.leaderStartTime`), while the pid is surely the leader's
  const scanned = cell.cgroup === undefined && cell.backend !== "pidns"
  const exactStart = tty || scanned ? yield* startTimeOf(table, pid) : undefined
  const leaderStartTime = tty || scanned ? Effect.succeed(exactStart) : startTimeWhenAsked(table, leader)
  const stopState = unaskedStop(services, { cell, tty, leader, sinks, listing }, () => group.target)
  const group = assemble({ shellId, cell, tty, held: scanned && exactStart !== undefined ? { ...held, leaderStartTime: exactStart } : held, leaderStartTime, table }, leader, sinks, stopState)
  if (services.watcher !== undefined) yield* services.watcher.update(shellId, group.target)
  // a group already stopped (a registry's shutdown stops all first) has nothing to do here: not even building a stop
  releases.add(() => stoppedReport(stopState) !== undefined ? undefined : Effect.flatMap(group.stop(), sayWhatOutlived(shellId)))
  return group
})

/** Where a spawn's child reports to, made in one step before the spawn. */
const unsafeMakeSinks = (limits: LimitsShape, cell: Cell): Sinks => ({
  output: OutputBuffer.unsafeMake(limits.bufferBytes),
  ...exitSink(),
  ...closedSink(),
  // where an init leads, the command is forked a moment after the spawn (see Containment's pidns init);
  // a deferred holds 2 KiB of Effect's prototype, which no other cell needs
  forked: cell.reportsExit ? Deferred.unsafeMake<void>(FiberId.none) : undefined
})

/** What a new group's stop is made of, before anyone asks for it: how it begins and looks at the cell. */
const unaskedStop = (
  { containment, limits, table }: Services,
  { cell, leader, listing, sinks, tty }: {
    readonly cell: Cell
    readonly tty: boolean
    readonly leader: Leader
    readonly sinks: Sinks
    readonly listing: KeptFiles | undefined
  },
  target: () => StopTarget
): StopState => ({
  phase: { _tag: "NotAsked" },
  run: containment.stop,
  grace: limits.grace,
  ready: readyToSignal(table, sinks, tty, leader.pid),
  ...(cell.cgroup !== undefined && listing !== undefined
    ? cgroupLook(table, cell.cgroup, listing, leader, tty, target)
    : cell.backend === "pidns"
    ? namespaceLook(table, leader, sinks.onExited, target)
    : cell.reaper
    ? initLook(table, cell, leader, sinks, tty, target)
    : noLook(leader)),
  exited: Deferred.await(sinks.exit),
  closed: Deferred.await(sinks.closed),
  // signal 0 sends nothing: a group id taken again by another process only makes the look go on
  groupAlive: table.signal(-leader.pid, 0),
  leader
})

/** A group signal sent before the init forked the command would miss it, and the grace would run out for nothing. */
const readyToSignal = (table: ProcessTable["Type"], { closed, exit, forked }: Sinks, tty: boolean, pid: number) =>
  forked !== undefined
    ? Effect.asVoid(bounded(Effect.raceAll([Deferred.await(forked), Deferred.await(exit), Deferred.await(closed)]), Duration.seconds(1)))
    : tty
    ? leadsItsSession(table, pid)
    : undefined

/**
 * A stop run by a release has no caller to read its report: what outlived
 * it is said. A cell's release strikes and names what its cell still holds;
 * without a cell, what a stop leaves is out of reach from then on.
 */
const sayWhatOutlived = (shellId: string) => (report: StopReport) =>
  Effect.sync(() => {
    if (report.survivors.length === 0 || report.containment === "cgroup") return
    process.emitWarning(
      `corral: the stop of shell ${shellId} (${report.containment}) left ${report.survivors.length} process(es) that no signal ended: ` +
        `pid(s) ${report.survivors.join(", ")}`
    )
  })

export const stopAll = (
  groups: ReadonlyArray<ProcessGroup>,
  options?: StopOptions
): Effect.Effect<ReadonlyArray<StopReport>> =>
  Effect.zipRight(
    // claiming, signalling and forking the rest's stop are one step: an interrupt between them would leave a claimed stop no one runs
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(
        claim(groups.filter((g) => g[StopStateId].phase._tag === "NotAsked"), options),
        ({ firstLook, forkRest }) => Effect.ensuring(restore(firstLook), forkRest)
      )
    ),
    Effect.suspend(() => {
      // all settled already (a first look that found every group empty): one step, not one per group
      const reports = groups.flatMap((g) => stoppedReport(g[StopStateId]) ?? [])
      return reports.length === groups.length ? Effect.succeed(reports) : Effect.forEach(groups, (g) => awaitStop(g[StopStateId]))
    })
  )

/** One group under a stop that `claim` claimed. */
interface Claimed {
  readonly group: ProcessGroup
  /** Whom its first signal reached, if `signalAtOnce` sent it. */
  readonly reached: GroupStop.Reached | undefined
}

/**
 * Moves `groups` to Stopping and sends the first signal at once where it
 * can. Those it reached get a first look (`GroupStop.firstLook`), which
 * settles those it finds empty; the stop proper of the others is forked,
 * at once for those not reached, after the look (`forkRest`) for the rest,
 * and settles each with its report.
 */
const claim = (groups: ReadonlyArray<ProcessGroup>, options: StopOptions | undefined) =>
  Effect.gen(function*() {
    // the grace runs from the first signal, not from when the forked stop gets to run
    const began = yield* Monotonic.millis
    const claimed: Array<Claimed> = []
    for (const group of groups) {
      const state = group[StopStateId]
      state.phase = { _tag: "Stopping", waiting: [] }
      const reached = yield* state.begin(options?.signal ?? "SIGTERM")
      claimed.push({ group, reached })
    }
    const settle = ({ group }: Claimed, exit: Exit.Exit<StopReport>) => {
      const state = group[StopStateId]
      const { phase } = state
      state.phase = { _tag: "Stopped", exit }
      if (Exit.isSuccess(exit)) state.letGo()
      if (phase._tag === "Stopping") phase.waiting.forEach((tell) => tell(exit))
    }
    const looked = claimed.filter((c) => c.reached !== undefined)
    const grace = Duration.toMillis(options?.grace ?? groups[0]?.[StopStateId].grace ?? 0)
    const firstLook = looked.length === 0 ? Effect.void : GroupStop.firstLook(
      looked.map(({ group, reached }) => {
        const { closed, emptied, groupAlive, listed, onLeaderExit, onUnpopulated } = group[StopStateId]
        return { target: group.target, reached: reached!, onLeaderExit, emptied, groupAlive, listed, closed, onUnpopulated }
      }),
      { first: options?.signal ?? "SIGTERM", began, grace },
      (i, report) => settle(looked[i]!, Exit.succeed(report))
    )
    const fork = (some: ReadonlyArray<Claimed>) =>
      some.length === 0 ? Effect.void : Effect.asVoid(Effect.forkDaemon(stopProper(some, options, began, settle)))
    // those not looked at do not wait for the others' look
    yield* fork(claimed.filter((c) => c.reached === undefined))
    const forkRest = Effect.suspend(() => fork(looked.filter(({ group }) => group[StopStateId].phase._tag === "Stopping")))
    return { firstLook, forkRest }
  })

/** The stop of `claimed` past their first look, each settled with its own report. */
const stopProper = (
  claimed: ReadonlyArray<Claimed>,
  options: StopOptions | undefined,
  began: number,
  settle: (claimed: Claimed, exit: Exit.Exit<StopReport>) => void
) => {
  const groups = claimed.map((c) => c.group)
  const sentAtOnce = new Map(claimed.flatMap(({ group, reached }) => reached === undefined ? [] : [[group.target.pgid, reached] as const]))
  // a group reached at once holds its command already
  const waits = claimed.flatMap(({ group, reached }) => reached === undefined ? group[StopStateId].ready ?? [] : [])
  // a wait for an init's fork is not part of the grace
  const run = groups[0]![StopStateId].run(groups.map((g) => g.target), {
    wakeOn: wakeOnAll(groups),
    hints: [Effect.forEach(groups, (g) => GroupStop.hintOf(g[StopStateId].onUnpopulated), { discard: true })],
    ...options,
    sentAtOnce,
    began: waits.length === 0 ? began : undefined
  })
  const inCells = Effect.zipRight(Effect.sync(() => groups.forEach((g) => g[StopStateId].moveIn())), run)
  const stop = waits.length === 0 ? inCells : Effect.zipRight(Effect.all(waits, { concurrency: "unbounded", discard: true }), inCells)
  const emptied = (reports: ReadonlyArray<StopReport>) => groups.flatMap((g, i) => reports[i]!.survivors.length === 0 ? [g[StopStateId].leader] : [])
  return Effect.flatMap(Effect.exit(stop), (exit) =>
    Effect.zipRight(
      Exit.isSuccess(exit) ? leadersReaped(emptied(exit.value)) : Effect.void,
      Effect.sync(() => claimed.forEach((c, i) => settle(c, Exit.map(exit, (reports) => reports[i]!))))
    ))
}

/**
 * Done once each leader, if still our unreaped child, is reaped, or
 * `REAPED_WITHIN_MS` of real time after. The stop proper waits so for the
 * leaders of the groups it emptied, and a scope's release before it takes
 * a leader for a stray (`endStray`). A cell, or a scan,
 * sees the last member leave in the middle of its exit, before it is a
 * zombie: a stop that returned then had its leader still exiting, its exit
 * status not known yet (every backend, in a test that makes the stop
 * kill). Under pidns the leader is `unshare`, whose exit comes once its
 * namespace is gone. The exit event comes soon after the death; one that
 * does not come is the scope's release's to deal with (`endStray`).
 */
const leadersReaped = (leaders: ReadonlyArray<Pick<Leader, "held" | "onExit">>): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const held = leaders.filter((leader) => leader.held())
    let left = held.length
    if (left === 0) return resume(Effect.void)
    const end = () => {
      cancelDeadline()
      cancels.forEach((cancel) => cancel())
    }
    const cancelDeadline = afterIoDue(REAPED_WITHIN_MS, () => {
      end()
      resume(Effect.void)
    })
    const cancels = held.map((leader) =>
      leader.onExit(() => {
        if (--left > 0) return
        end()
        resume(Effect.void)
      })
    )
    return Effect.sync(end)
  })

/**
 * The events that end a stop's pause early: every leader has exited, and
 * every group's pipes have closed. Waking when all have, not at each one,
 * keeps a stop of many groups from checking them all again at each of
 * their events; for one group these are its own two events. Without them,
 * a stop polled at up to a quarter of its age, and saw a group of 50 gone
 * 7 ms after its pipes closed.
 */
const wakeOnAll = (groups: ReadonlyArray<ProcessGroup>): ReadonlyArray<Effect.Effect<void>> => [
  Effect.forEach(groups, (g) => g[StopStateId].exited, { discard: true }),
  Effect.forEach(groups, (g) => g[StopStateId].closed, { discard: true })
]

const stoppedReport = ({ phase }: StopState): StopReport | undefined =>
  phase._tag === "Stopped" && Exit.isSuccess(phase.exit) ? phase.exit.value : undefined

const awaitStop = (state: StopState): Effect.Effect<StopReport> => {
  const { phase } = state
  switch (phase._tag) {
    case "Stopped":
      return phase.exit
    case "Stopping":
      return Effect.async<StopReport>((resume) => {
        const tell = (exit: Exit.Exit<StopReport>) => resume(exit)
        phase.waiting.push(tell)
        return Effect.sync(() => {
          const at = phase.waiting.indexOf(tell)
          if (at >= 0) phase.waiting.splice(at, 1)
        })
      })
    case "NotAsked":
      return Effect.dieMessage("ProcessGroup.stopAll: a group's stop was awaited before it was begun")
  }
}
