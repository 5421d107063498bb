/**
 * The process table: who is alive, in which group and session, since when.
 * Also the only place that sends signals, so a test layer can script both.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Descriptors from "./internal/descriptors.js"
import { isGone } from "./internal/procStat.js"
import * as ProcForeign from "./internal/procForeign.js"
import * as ProcLinux from "./internal/procLinux.js"
import type { PidMark } from "./internal/procLinux.js"
import * as ProcPs from "./internal/procPs.js"
import type { KeptFiles } from "./internal/readSmall.js"
import { makeKeptFiles } from "./internal/readSmall.js"

export interface ProcessInfo {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  readonly sid: number
  /** One-letter kernel state: R, S, D, T, Z, X, ... */
  readonly state: string
  readonly threads: number
  /** Clock ticks since boot, as in field 22 of `/proc/<pid>/stat`. */
  readonly startTime: number
  readonly comm: string
}

/** Lookups for a caller that reads the same processes again and again; see `ProcessTable.keptLookups`. */
export interface KeptLookups {
  readonly lookup: (pid: number) => Effect.Effect<Option.Option<ProcessInfo>>
  /** Lets go of what the lookups hold (in the next macrotask: nothing waits on it). */
  readonly close: Effect.Effect<void>
}

/** How many processes' files `keptLookups` keeps open at most; more are read as `lookup` reads them. */
const MAX_KEPT_PROCESSES = 128

/** A signal by name, or by number where Node has no name for it (real-time signals, or 0 to probe). */
export type Signal = NodeJS.Signals | number

const ownProc = (own: OwnProcess["Type"], uptime: KeptFiles) =>
  ProcessTable.of({
    self: own.pid,
    scan: Effect.sync(() => ProcLinux.scan()),
    scanSince: (since) => Effect.sync(() => ProcLinux.scan(since)),
    mark: Effect.sync(() => ProcLinux.mark()),
    lookup: (pid) => Effect.sync(() => Option.fromNullable(ProcLinux.read(pid))),
    keptLookups: Effect.sync(() => {
      const files = makeKeptFiles(MAX_KEPT_PROCESSES)
      return {
        lookup: (pid) => Effect.sync(() => Option.fromNullable(ProcLinux.read(pid, files.read))),
        close: Effect.sync(() => void setImmediate(files.close))
      }
    }),
    shellIdsOf: (pid) => settledShellIds(() => ProcLinux.shellIdsReader(pid)),
    uidOf: (pid) => Effect.sync(() => Option.fromNullable(ProcLinux.uidOf(pid))),
    // our own through /proc/self: a /proc mounted for another namespace would name another process
    pidNamespaceOf: (pid, forChildren) =>
      Effect.sync(() => Option.fromNullable(ProcLinux.pidNamespaceOf(pid === process.pid ? "self" : pid, forChildren))),
    now: Effect.sync(() => ProcLinux.now(uptime.read)),
    signal: signaller(own)
  })

/** The per-process files of our `pid`, read at its entry in another namespace's `/proc`. */
const foreignProc = (proc: ReturnType<typeof ProcForeign.make>, own: OwnProcess["Type"], uptime: KeptFiles) => {
  const at = <A>(pid: number, read: (entry: number) => A | undefined) =>
    Effect.sync(() => {
      const entry = proc.procEntry(pid)
      return entry === undefined ? undefined : read(entry)
    })
  return ProcessTable.of({
    // read through our namespace's ids (`NSpid`): our pid is the one we know
    self: own.pid,
    scan: Effect.sync(proc.scan),
    // another namespace's /proc: its pids are not the allocator's we can read
    scanSince: () => Effect.sync(proc.scan),
    mark: Effect.succeed(undefined),
    lookup: (pid) => Effect.sync(() => Option.fromNullable(proc.read(pid))),
    keptLookups: plainLookups((pid) => Effect.sync(() => Option.fromNullable(proc.read(pid)))),
    shellIdsOf: (pid) =>
      settledShellIds(() => {
        const entry = proc.procEntry(pid)
        return entry === undefined ? () => [] : ProcLinux.shellIdsReader(entry)
      }),
    uidOf: (pid) => Effect.map(at(pid, ProcLinux.uidOf), Option.fromNullable),
    pidNamespaceOf: (pid, forChildren) =>
      pid === process.pid
        ? Effect.sync(() => Option.fromNullable(ProcLinux.pidNamespaceOf("self", forChildren)))
        : Effect.map(at(pid, (entry) => ProcLinux.pidNamespaceOf(entry, forChildren)), Option.fromNullable),
    now: Effect.sync(() => ProcLinux.now(uptime.read)),
    signal: signaller(own)
  })
}

/** How long a process in an exec is read again for (see `settledShellIds`). */
const MAX_EXEC_WAIT_MS = 100

/**
 * A process's shell ids, read again every millisecond while it is in an
 * exec (see `ProcLinux.shellIdsReader`): an exec is done within a millisecond
 * unless its binary is paged in from a slow disk. One still in it after
 * `MAX_EXEC_WAIT_MS` reads as carrying none. Real timers: the kernel does
 * not follow a test's clock.
 */
const settledShellIds = (reader: () => () => ReadonlyArray<string> | undefined): Effect.Effect<ReadonlyArray<string>> =>
  Effect.suspend(() => {
    const read = reader()
    const now = read()
    if (now !== undefined) return Effect.succeed(now)
    return Effect.async<ReadonlyArray<string>>((resume) => {
      const until = performance.now() + MAX_EXEC_WAIT_MS
      const timer = setInterval(() => {
        const ids = read()
        if (ids === undefined && performance.now() < until) return
        clearInterval(timer)
        resume(Effect.succeed(ids ?? []))
      }, 1)
      return Effect.sync(() => clearInterval(timer))
    })
  })

/** `/proc/uptime` kept open while the table is: every spawn reads it, in one syscall instead of three. */
const keptUptime = Effect.acquireRelease(Effect.sync(() => makeKeptFiles(1)), (files) => Effect.sync(files.close))

/**
 * Facts of our own process that a process table guards: its pid and its
 * process group, which it never signals. Process-wide, so they come from a
 * layer: `layer` reads them when it is built, a test gives its own.
 */
export class OwnProcess extends Context.Tag("@corral/core/OwnProcess")<OwnProcess, {
  readonly pid: number
  /** Undefined where it cannot be read (no `/proc`). */
  readonly pgid: number | undefined
}>() {
  static readonly layer: Layer.Layer<OwnProcess> = Layer.sync(OwnProcess, () => ({ pid: process.pid, pgid: readOwnGroup() }))
  static readonly layerWith = (own: OwnProcess["Type"]): Layer.Layer<OwnProcess> => Layer.succeed(OwnProcess, own)
}

export class ProcessTable extends Context.Tag("@corral/core/ProcessTable")<ProcessTable, {
  /** This process's pid as the table numbers processes: never a member of a shell, whatever it reads as. */
  readonly self: number
  /** Every process the table can see, zombies included. */
  readonly scan: Effect.Effect<ReadonlyArray<ProcessInfo>>
  /** At least every process born since the mark (all of them where the table cannot tell): what a shell's members can be among. */
  readonly scanSince: (since: PidMark) => Effect.Effect<ReadonlyArray<ProcessInfo>>
  /** Where the pid allocator stands now, for `scanSince`; undefined where it cannot be read. */
  readonly mark: Effect.Effect<PidMark | undefined>
  /** One process, without scanning the rest. */
  readonly lookup: (pid: number) => Effect.Effect<Option.Option<ProcessInfo>>
  /**
   * Lookups for a caller that reads the same processes again and again (a
   * stop's rechecks). Where the table reads `/proc`, each process's stat file
   * stays open until `close`: read again in one syscall, not three, and it
   * still names the process it was opened on once that one is gone and its
   * pid reused (it reads as gone).
   */
  readonly keptLookups: Effect.Effect<KeptLookups>
  /**
   * The shell ids a process carries, when they can be read: its
   * `CORRAL_SHELL_ID`, and the outer ones of a nested corral (`CORRAL_SHELL_IDS`).
   */
  readonly shellIdsOf: (pid: number) => Effect.Effect<ReadonlyArray<string>>
  /** The real uid a process runs as, when it can be read: who started it, whatever it became since. */
  readonly uidOf: (pid: number) => Effect.Effect<Option.Option<number>>
  /**
   * The inode of the PID namespace a process is in, or (`forChildren`) the
   * one its next children will be born in: `/proc/<pid>/ns/pid[_for_children]`.
   */
  readonly pidNamespaceOf: (pid: number, forChildren?: boolean) => Effect.Effect<Option.Option<number>>
  /** Now, in the same unit as `ProcessInfo.startTime`. */
  readonly now: Effect.Effect<number>
  /**
   * Sends a signal to a process (`target > 0`) or a group (`target < 0`).
   * Refuses |target| <= 1 and corral's own process and group. Returns whether
   * the kernel accepted it (false on ESRCH).
   */
  readonly signal: (target: number, signal: Signal) => Effect.Effect<boolean>
}>() {
  /**
   * Reads `/proc`; Linux only. A `/proc` of another PID namespace (entered
   * without mounting its own) is read through each process's ids in ours.
   * Never signals the process and group `OwnProcess` names.
   */
  static readonly layerLinuxWithoutDependencies: Layer.Layer<ProcessTable, never, OwnProcess> = Layer.scoped(
    ProcessTable,
    Effect.zipWith(OwnProcess, keptUptime, (own, uptime) => {
      // held from the start, before the program can have run out of them
      Descriptors.reserve()
      const level = ProcForeign.ourLevel()
      return level === undefined ? ownProc(own, uptime) : foreignProc(ProcForeign.make(level), own, uptime)
    })
  )

  /** `layerLinuxWithoutDependencies` guarding our own process, as read when the layer is built. */
  static readonly layerLinux: Layer.Layer<ProcessTable> = ProcessTable.layerLinuxWithoutDependencies.pipe(Layer.provide(OwnProcess.layer))

  /** Uses `ps(1)`, for systems without `/proc`. Threads are not visible and count as 1. */
  static readonly layerPsWithoutDependencies: Layer.Layer<ProcessTable, never, OwnProcess> = Layer.effect(
    ProcessTable,
    Effect.map(OwnProcess, (own) =>
      ProcessTable.of({
        self: own.pid,
        scan: Effect.sync(ProcPs.scan),
        scanSince: () => Effect.sync(ProcPs.scan),
        mark: Effect.succeed(undefined),
        lookup: (pid) => Effect.sync(() => Option.fromNullable(ProcPs.scan().find((p) => p.pid === pid))),
        keptLookups: plainLookups((pid) => Effect.sync(() => Option.fromNullable(ProcPs.scan().find((p) => p.pid === pid)))),
        shellIdsOf: () => Effect.succeed([]),
        uidOf: (pid) => Effect.sync(() => Option.fromNullable(ProcPs.uidOf(pid))),
        pidNamespaceOf: () => Effect.succeed(Option.none()),
        now: Effect.sync(ProcPs.now),
        signal: signaller(own)
      }))
  )

  /** `layerPsWithoutDependencies` guarding our own process, as read when the layer is built. */
  static readonly layerPs: Layer.Layer<ProcessTable> = ProcessTable.layerPsWithoutDependencies.pipe(Layer.provide(OwnProcess.layer))

  /** `/proc` where it exists, `ps` elsewhere. */
  static readonly layer: Layer.Layer<ProcessTable> = Layer.suspend(() =>
    ProcLinux.available() ? ProcessTable.layerLinux : ProcessTable.layerPs
  )

  /**
   * A scripted table. Tests mutate `processes` and read `signals`; signals
   * have no effect unless `onSignal` applies one.
   */
  static readonly layerTest = (script: TestScript): Layer.Layer<ProcessTable> =>
    Layer.succeed(ProcessTable, ProcessTable.of({
      // no pid: the scripted processes are the test's, whatever this process's real pid is
      self: 0,
      scan: Ref.get(script.processes),
      scanSince: () => Ref.get(script.processes),
      mark: Effect.succeed(undefined),
      lookup: (pid) => Effect.map(Ref.get(script.processes), (ps) => Option.fromNullable(ps.find((p) => p.pid === pid))),
      keptLookups: plainLookups((pid) => Effect.map(Ref.get(script.processes), (ps) => Option.fromNullable(ps.find((p) => p.pid === pid)))),
      shellIdsOf: (pid) => Effect.succeed(script.shellIds?.get(pid)?.split(",") ?? []),
      // a scripted process runs as the test's own user unless the script says otherwise
      uidOf: (pid) =>
        Effect.map(Ref.get(script.processes), (ps) =>
          Option.fromNullable(script.uids?.get(pid) ?? (ps.some((p) => p.pid === pid) ? process.getuid?.() : undefined))),
      pidNamespaceOf: (pid) => Effect.succeed(Option.fromNullable(script.pidNamespaces?.get(pid))),
      now: Ref.get(script.now),
      signal: (target, signal) =>
        Math.abs(target) <= 1
          ? Effect.succeed(false)
          : Ref.update(script.signals, (all) => [...all, { target, signal }]).pipe(
            // like kill(2): accepted when the target existed, even if the signal ends it
            Effect.zipRight(Ref.get(script.processes)),
            Effect.map((ps) => ps.some((p) => (target < 0 ? p.pgid === -target : p.pid === target))),
            Effect.tap(() => script.onSignal?.(target, signal) ?? Effect.void)
          )
    }))
}

export interface TestScript {
  readonly processes: Ref.Ref<ReadonlyArray<ProcessInfo>>
  readonly signals: Ref.Ref<ReadonlyArray<{ readonly target: number; readonly signal: Signal }>>
  readonly now: Ref.Ref<number>
  readonly shellIds?: Map<number, string>
  /** Real uids by pid; a scripted process not in it runs as the test's user. */
  readonly uids?: Map<number, number>
  /** PID-namespace inodes by pid; a process not in it is in none the test cares about. */
  readonly pidNamespaces?: Map<number, number>
  readonly onSignal?: (target: number, signal: Signal) => Effect.Effect<void>
}

export const makeTestScript = (
  processes: ReadonlyArray<ProcessInfo> = [],
  options: Pick<TestScript, "shellIds" | "uids" | "pidNamespaces" | "onSignal"> = {}
): Effect.Effect<TestScript> =>
  Effect.all({
    processes: Ref.make(processes),
    signals: Ref.make<TestScript["signals"] extends Ref.Ref<infer A> ? A : never>([]),
    now: Ref.make(0)
  }).pipe(Effect.map((refs) => ({ ...refs, ...options })))

/** Live members of a group, zombies excluded. */
export const groupMembers = (table: ReadonlyArray<ProcessInfo>, pgid: number) =>
  table.filter((p) => p.pgid === pgid && !isGone(p))

/** Live members of a session, zombies excluded. */
export const sessionMembers = (table: ReadonlyArray<ProcessInfo>, sid: number) =>
  table.filter((p) => p.sid === sid && !isGone(p))

export { isGone }

/** Lookups that keep nothing: each is a `lookup`. */
const plainLookups = (lookup: KeptLookups["lookup"]): Effect.Effect<KeptLookups> => Effect.succeed({ lookup, close: Effect.void })

/** Our own process group, where `/proc` tells it. */
const readOwnGroup = (): number | undefined => {
  try {
    return ProcLinux.available() ? ProcLinux.read(process.pid)?.pgid : undefined
  } catch {
    return undefined
  }
}

const signaller = (own: OwnProcess["Type"]) => (target: number, signal: Signal) => Effect.sync(() => sendSignal(own, target, signal))

const sendSignal = (own: OwnProcess["Type"], target: number, signal: Signal): boolean => {
  if (!Number.isSafeInteger(target) || Math.abs(target) <= 1) return false
  if (target === own.pid || target === -own.pid || (own.pgid !== undefined && target === -own.pgid)) return false
  try {
    process.kill(target, signal)
    return true
  } catch {
    return false
  }
}
