/**
 * A shell's life in the registry, from its spawn to its drop: it ends by
 * itself, at its lifetime or by a kill; its stop settles it into a final
 * status with its event; it is kept for the retention, then dropped. The
 * shutdown ends every life at once.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as MutableRef from "effect/MutableRef"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type { Containment } from "../Containment.js"
import type { StopReport } from "../GroupStop.js"
import type { LimitsShape } from "../Limits.js"
import type { ExitStatus, SpawnSpec } from "../ProcessGroup.js"
import * as ProcessGroup from "../ProcessGroup.js"
import type { ShellStatus, StopCause } from "../Shell.js"
import type { ShellEvent, StartOptions } from "../ShellRegistry.js"
import { nextMacrotask } from "./macrotask.js"
import * as Monotonic from "./monotonic.js"
import type { RegistryJournal } from "./registryJournal.js"
import type { Shell, Shells } from "./registryShells.js"
import { isActive } from "../Shell.js"
import { unsafeInfoOf } from "./registryShells.js"
import { currentDirectory } from "./currentDirectory.js"

export interface Options {
  readonly limits: LimitsShape
  readonly containment: Containment["Type"]
  readonly shells: Shells
  readonly journal: RegistryJournal
  /** Groups whose stop left nothing running (see `CrashSafety.emptied`). */
  readonly emptied: (groups: ReadonlyArray<ProcessGroup.ProcessGroup>) => Effect.Effect<void>
  /** `ProcessGroup.spawner`'s, its services resolved. */
  readonly spawn: (spec: SpawnSpec) => Effect.Effect<ProcessGroup.OwnedGroup, ProcessGroup.ProcessGroupError>
}

const unsafeMarkStopping = (shell: Shell, by: StopCause) => {
  const s = MutableRef.get(shell.status)
  if (isRunning(s)) MutableRef.set(shell.status, { _tag: "Stopping", by })
}

const markStopping = (shell: Shell, by: StopCause) => Effect.sync(() => unsafeMarkStopping(shell, by))

/**
 * Where a stop leaves a shell that is still active. It was killed by corral
 * only if a stop was asked for and signalled someone; a stop that found the
 * group already empty means it ended by itself.
 */
const finalStatus = (current: ShellStatus, exit: Option.Option<ExitStatus>, report: StopReport): ShellStatus => {
  const signal = Option.isSome(exit) && exit.value._tag === "Signaled" ? exit.value.signal : undefined
  const byCorral = current._tag === "Stopping" && report.signals.SIGTERM + report.signals.SIGKILL > 0
  return byCorral
    ? { _tag: "Killed", signal: signal ?? (report.escalated ? "SIGKILL" : "SIGTERM"), by: current.by }
    : signal !== undefined
    ? { _tag: "Killed", signal }
    : { _tag: "Exited", code: Option.isSome(exit) && exit.value._tag === "Exited" ? exit.value.code : 0 }
}

/**
 * Moves each shell to its final status once, whoever gets here first, and
 * publishes its event: many shells in one synchronous step under the event
 * lock (a step per shell was 6.5 ms of a 200-shell shutdown, 1.8 ms now),
 * with one journal change.
 */
const settleAll = ({ journal, shells }: Options, stopped: ReadonlyArray<readonly [Shell, StopReport]>) =>
  shells.inOrder(Effect.flatMap(Effect.forEach(stopped, ([shell]) => shell.group.exitStatus), (exits) =>
    Effect.clockWith((clock) =>
      Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        const events: Array<ShellEvent> = []
        const ended: Array<Shell> = []
        stopped.forEach(([shell, report], i) => {
          const current = MutableRef.get(shell.status)
          if (!isActive(current)) return
          const final = finalStatus(current, exits[i]!, report)
          MutableRef.set(shell.status, final)
          MutableRef.set(shell.endedAt, now)
          const info = unsafeInfoOf(shell)
          events.push(final._tag === "Killed" && final.by !== undefined ? { _tag: "Killed", info, report } : { _tag: "Exited", info })
          ended.push(shell)
          Deferred.unsafeDone(shell.settled, Effect.void)
        })
        return shells.publishEnded(ended, events)
      })
    ))).pipe(
      Effect.zipRight(journal.changed)
    )

const stop = (options: Options, shell: Shell) =>
  Effect.flatMap(shell.group.stop(), (report) => Effect.as(settleAll(options, [[shell, report]]), report))

/** Counts what still runs after the leader exited; the first count is an event. */
const linger = ({ shells }: Options, shell: Shell, exit: ExitStatus, members: number) =>
  shells.inOrder(Effect.gen(function*() {
    const was = MutableRef.get(shell.status)
    if (!isRunning(was)) return
    MutableRef.set(shell.status, { _tag: "Lingering", exit, members })
    if (was._tag === "Running") yield* shells.publish([{ _tag: "Lingering", info: unsafeInfoOf(shell) }])
  }))

/** After the leader's exit, until the group is empty: the shell's natural end. */
const naturalEnd = (options: Options, shell: Shell, exit: ExitStatus) =>
  Effect.gen(function*() {
    // a stop under way or over (a kill that settled before this lifecycle began) empties the group: nothing to watch
    if (!isRunning(MutableRef.get(shell.status))) return
    // what runs on where nothing may linger is the stop's to end, not the shell's to wait for
    if (!(yield* shell.group.mayLinger)) return
    let members = yield* options.containment.members(shell.group.target)
    while (members > 0) {
      yield* linger(options, shell, exit, members)
      yield* Effect.sleep(Duration.seconds(1))
      members = yield* options.containment.members(shell.group.target)
    }
  })

/**
 * A shell's life from its end on, however it came: its stop runs through and
 * its group is released; then it is kept for the retention, or until the shutdown
 * or its drop to make room, whichever comes first.
 */
const afterEnd = (options: Options, shuttingDown: Deferred.Deferred<void>, shell: Shell) =>
  Effect.gen(function*() {
    // begun, the end runs through: the shutdown interrupts lifecycles and waits for them
    yield* Effect.uninterruptible(Effect.zipRight(stop(options, shell), shell.owned.release))
    const retained = yield* Effect.raceFirst(
      Effect.as(Effect.sleep(options.limits.retention), true),
      Effect.as(Effect.race(Deferred.await(shuttingDown), Deferred.await(shell.gone)), false)
    )
    if (retained) yield* Effect.sync(() => options.shells.unsafeDrop(shell))
  })

/**
 * A shell's lifecycle from its leader's exit on, a fiber begun then (see
 * `watchExit`; the lifetime is kept by the registry's one keeper, see
 * `keepLifetimes`): its natural end, then its end.
 */
const lifecycle = (options: Options, shuttingDown: Deferred.Deferred<void>) => (shell: Shell) =>
  shell.group.awaitExit.pipe(
    Effect.flatMap((exit) => naturalEnd(options, shell, exit)),
    Effect.flatMap(() => afterEnd(options, shuttingDown, shell)),
    // `ensuring`, not `onInterrupt`: a lifecycle that ran to its end released its group already (a release
    // runs once), and `onInterrupt` read each interrupt's cause into a set of fiber ids, 200 times
    // over at a shutdown (about 40% of the CPU of interrupting 200 lifecycles)
    Effect.ensuring(Effect.suspend(() => releaseIfDropped(options, shell)))
  )

/**
 * The shutdown interrupts the lifecycles under way and releases the groups
 * of the shells it lists. A shell killed, then dropped to make room before
 * its lifecycle got to release its group, is not listed: its group is
 * released when its lifecycle ends.
 */
const releaseIfDropped = ({ shells }: Options, shell: Shell) =>
  shells.byId.get(shell.id) === shell ? Effect.void : shell.owned.release

/** The lifecycle of a shell that outlived its lifetime, in place of any under way (one that watched it linger). */
const outlived = (options: Options, shuttingDown: Deferred.Deferred<void>) => (shell: Shell) =>
  Effect.zipRight(markStopping(shell, "lifetime"), afterEnd(options, shuttingDown, shell))

/** When a shell's lifetime is up, in the registry's clock's monotonic ms (see `monotonic.ts`). */
interface Due {
  readonly id: string
  readonly at: number
}

const isRunning = (status: ShellStatus) => status._tag === "Running" || status._tag === "Lingering"

/**
 * Every shell's lifetime, kept by one fiber of the registry, not a timer
 * fiber raced against each shell's exit (two fibers more per idle shell,
 * 6 KiB of its heap). The lifetime is the registry's, so shells are due in
 * the order they started: it takes each from `started` in that order,
 * sleeps until it is due, and hands one that still runs to `outlive`.
 * `started` holds ids, not shells: a shell dropped before it was due is
 * not kept alive by it.
 */
const keepLifetimes = (started: Queue.Dequeue<Due>, outlive: (id: string) => Effect.Effect<void>) =>
  Effect.forever(Effect.gen(function*() {
    const due = yield* Queue.take(started)
    const now = yield* Monotonic.millis
    if (due.at > now) yield* Effect.sleep(Duration.millis(due.at - now))
    yield* outlive(due.id)
  }))

/** A new shell's record, its group its own to release. */
const spawnShell = (options: Options, id: string, tag: string, spec: SpawnSpec, startOptions: StartOptions) =>
  Effect.gen(function*() {
    // what the record holds besides its group, made before the spawn: after a fork, each page the
    // supervisor writes to costs a fault, so the start does as little as it can after its spawn
    const { startedAt, ...state } = yield* Effect.clockWith((clock) => Effect.sync(() => ({
      startedAt: clock.unsafeCurrentTimeMillis(),
      startedMonotonic: Monotonic.unsafeMillis(clock),
      status: MutableRef.make<ShellStatus>({ _tag: "Running" }),
      endedAt: MutableRef.make<number | undefined>(undefined),
      settled: Deferred.unsafeMake<void>(FiberId.none),
      gone: Deferred.unsafeMake<void>(FiberId.none),
      cursors: new Map<string, number>()
    })))
    const owned = yield* options.spawn(spec)
    const { group } = owned
    return {
      id,
      group,
      owned,
      base: {
        id,
        tag,
        pid: group.pid,
        command: typeof spec.command === "string" ? spec.command : spec.command.join(" "),
        cwd: spec.cwd ?? currentDirectory(),
        name: startOptions.name,
        owner: startOptions.owner,
        containment: group.containment,
        ...(group.tty ? { tty: true } : {}),
        startedAt
      },
      ...state
    } satisfies Shell
  })

/** What the shutdown takes over from the lifecycles (see `make`). */
interface Handover {
  readonly shuttingDown: Deferred.Deferred<void>
  /** The fibers to interrupt: the lifetimes' keeper and the lifecycles under way. */
  readonly fibers: () => ReadonlyArray<Fiber.RuntimeFiber<unknown, unknown>>
  /** The shells whose later life has not begun (see `make`'s `follow`), taken once. */
  readonly takePending: () => ReadonlyArray<Shell>
}

/**
 * Every shell at once, with one process-table scan per tick for all of
 * them, then one settling, one journal removal and one watcher write; then
 * the end of the event streams.
 */
const shutdown = (options: Options, handover: Handover) =>
  Effect.gen(function*() {
    const { journal, shells } = options
    yield* Deferred.succeed(handover.shuttingDown, undefined)
    // shells whose later life has not begun: the shutdown ends them with the others
    const unfollowed = handover.takePending()
    const all = [...shells.byId.values()]
    // one step for all: each shell's own effect cost a 200-shell shutdown 0.3-0.7 ms before its first signal
    yield* Effect.sync(() => all.forEach((shell) => unsafeMarkStopping(shell, "shutdown")))
    // the stop first: its first signals go out while the journal's writer and the interrupts of the
    // lifecycles under way (of shells that ended) are waited for, and the kernel ends the processes
    // meanwhile. A lifecycle that got past its interrupt's reach joins this stop and settles and closes
    // its shell once, as below (both are once only)
    const stopping = yield* Effect.fork(ProcessGroup.stopAll(all.map((s) => s.group)))
    yield* journal.stopWriting
    // a lingering shell's lifecycle would scan for its group and settle it again: here all are settled at once
    yield* Fiber.interruptAll(handover.fibers())
    const reports = yield* Fiber.join(stopping)
    yield* options.emptied(all.filter((_, i) => reports[i]!.survivors.length === 0).map((s) => s.group))
    yield* settleAll(options, all.map((shell, i) => [shell, reports[i]!] as const))
    // in one pass, without a fiber or a scope each: a release waits only for output not at its end yet (at
    // most 200 ms, see ProcessGroup), and after one turn of the event loop the dead's pipes have been read to their end
    yield* nextMacrotask
    yield* ProcessGroup.releaseAll(all.map((s) => s.owned))
    // one of them dropped already (killed, then dropped to make room) is not listed: it is released here
    yield* Effect.forEach(unfollowed, (s) => releaseIfDropped(options, s), { discard: true })
    yield* journal.remove
    yield* shells.endEvents
  })

/**
 * What only a shell's later life needs (its exit's listener, its lifetime,
 * the journal's change) begins in the macrotask after its start, off the
 * start's path: the caller has the id first. Nothing of it is needed
 * sooner: a kill stops the group itself, and the listener of a shell that
 * ended meanwhile is called in a macrotask. A drop, which may come sooner,
 * begins what is pending first (`follow`).
 */
const makeLaterLife = (begin: (shell: Shell) => void, changed: () => void) => {
  let pending: Array<Shell> = []
  const follow = () => {
    const due = pending
    pending = []
    due.forEach(begin)
    if (due.length > 0) changed()
  }
  return {
    /** Begins `shell`'s later life in the next macrotask, with the others started in this one. */
    add: (shell: Shell) => {
      if (pending.push(shell) === 1) setImmediate(follow)
    },
    follow,
    take: () => {
      const taken = pending
      pending = []
      return taken
    }
  }
}

export const make = (options: Options) =>
  Effect.gen(function*() {
    const { journal, shells } = options
    const lifecycles = yield* FiberMap.make<string>()
    // forked with the registry's context, not each start's: a lifecycle would hold its start's context and span as long as it lives;
    // captured interruptible, whatever the layer is built under, so that the shutdown's interrupt reaches every lifecycle's waits
    const runLifecycle = yield* Effect.interruptible(FiberMap.runtime(lifecycles)<never>())
    const shuttingDown = yield* Deferred.make<void>()
    const live = lifecycle(options, shuttingDown)
    const outlive = outlived(options, shuttingDown)
    const lifetime = Duration.toMillis(options.limits.lifetime)
    const started = yield* Queue.unbounded<Due>()
    // replacing a lifecycle interrupts one that watched a lingering group; one that is stopping already finishes that stop first
    const keeper = yield* Effect.forkScoped(keepLifetimes(started, (id) =>
      Effect.suspend(() => {
        const shell = shells.byId.get(id)
        if (shell !== undefined && isRunning(MutableRef.get(shell.status))) runLifecycle(id, outlive(shell))
        return Effect.void
      })))
    // Set when the shutdown begins: from then on it ends every registered shell itself, all at once.
    let closing = false
    // A shell's lifecycle begins at its leader's exit, not at its start: a running shell holds a listener,
    // not a fiber, and the shutdown has no fiber per shell to interrupt (interrupting 200 waiting
    // lifecycles was 10-14 ms of a 200-shell shutdown). One already there (its lifetime ran out) goes on.
    const later = makeLaterLife((shell) => {
      shell.group.unsafeOnExit(() => {
        if (closing && shells.byId.get(shell.id) === shell) return
        runLifecycle(shell.id, live(shell), { onlyIfMissing: true })
      })
      Queue.unsafeOffer(started, { id: shell.id, at: shell.startedMonotonic + lifetime })
    }, journal.unsafeChanged)
    return {
      /** Spawns a shell and registers it; its lifecycle begins in the next macrotask (see `makeLaterLife`). `tag` is its `CORRAL_SHELL_ID`. */
      launch: (id: string, tag: string, spec: SpawnSpec, startOptions: StartOptions) =>
        Effect.gen(function*() {
          const shell = yield* spawnShell(options, id, tag, spec, startOptions)
          const info = yield* shells.register(shell)
          yield* Effect.sync(() => later.add(shell))
          return info
        }),
      kill: (shell: Shell) => Effect.zipRight(markStopping(shell, "request"), stop(options, shell)),
      // its lifecycle ends by itself once its stop has run through, and a start does not wait for that; not
      // interrupted, for an interrupt that reached it inside its uninterruptible stop was lost there, and it
      // waited out the whole retention
      dropNow: (shell: Shell) => {
        later.follow()
        shells.unsafeDrop(shell)
      },
      shutdown: Effect.suspend(() => {
        closing = true
        return shutdown(options, {
          shuttingDown,
          fibers: () => [keeper, ...Array.from(lifecycles, ([, fiber]) => fiber)],
          takePending: later.take
        })
      })
    }
  })
