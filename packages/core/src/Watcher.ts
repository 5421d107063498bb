/**
 * The watcher: a process of its own that stops the groups it was told of
 * when the supervisor dies without stopping them itself, however it dies
 * (SIGKILL included). See `internal/watcherMain.ts`.
 */
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { getSystemErrorName } from "node:util"
import type { Stream } from "node:stream"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import type { StopTarget } from "./GroupStop.js"
import { bounded } from "./internal/bounded.js"
import * as Monotonic from "./internal/monotonic.js"
import type * as Message from "./internal/watcherMessage.js"
import * as SpawnFailure from "./internal/spawnFailure.js"
import { Limits, type LimitsShape } from "./Limits.js"

/** Targets are known by key: an add of the same key replaces what the watcher knew. */
export type WatcherMessage = typeof Message.WatcherMessage.Type

/**
 * The watcher of this supervisor. `ProcessGroup.spawn` uses it when it is
 * provided: it announces a shell before spawning it (by tag and cgroup, the
 * pid is not known yet), again once it has a pid, and withdraws it after
 * the shell's stop, so there is no moment when a shell runs unwatched.
 *
 * Messages are written in batches: `add` writes what is pending and itself
 * before it returns (a spawn may follow at once); `update` and `remove` go
 * with the next write, at the latest once the current tick's work is done,
 * so stopping 200 shells is one write. Losing an update or a removal to a
 * crash is harmless: the watcher then stops by tag and cgroup, or finds a
 * withdrawn group already empty. A registry under the cgroup backend has
 * the watcher watch all its cells as one target (`watchCells`, announced
 * with the first shell): a later shell's `add` goes with the next batch
 * too, since its cell, made before its spawn, is already watched.
 */
export class Watcher extends Context.Tag("@corral/core/Watcher")<Watcher, {
  /** The watcher process now: another replaces one that dies. */
  readonly pid: Effect.Effect<number>
  /**
   * Announces a target; written to the watcher before this returns, unless
   * the target's cgroup is in cells the watcher already watches
   * (`watchCells`): then it goes with the next batch.
   */
  readonly add: (key: string, target: StopTarget) => Effect.Effect<void>
  /** Tells more of a target already announced (its pid once known); sent with the next batch. */
  readonly update: (key: string, target: StopTarget) => Effect.Effect<void>
  /** Withdraws a target; sent with the next batch. */
  readonly remove: (key: string) => Effect.Effect<void>
  /**
   * `remove` done now: for a group's release, which runs synchronously where
   * it has nothing to wait for (see `internal/releases`), where an effect
   * would make every release of a shutdown's 200 wait in one chain of them.
   */
  readonly unsafeRemove: (key: string) => void
  /** Watches the group for the scope's lifetime. */
  readonly guard: (target: StopTarget) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Watches every cgroup cell made in `cells` (`Containment.cells`) for the
   * scope's lifetime, as one target: if the supervisor dies, whatever runs in
   * them is stopped, announced or not. A shell there is announced all the
   * same, but not on its start's path: a write that wakes the watcher there
   * costs the start a context switch.
   */
  readonly watchCells: (cells: string) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Ends the watcher now if it watches no group (a shutdown whose stops are
   * over; cells watched as a whole are then empty), so its exit overlaps what the release does before it waits for
   * it. A later `add` starts another.
   */
  readonly endIfIdle: Effect.Effect<void>
}>() {}

/** The key of a target: its tag where it has one (known before its pid), else its group. */
export const keyOf = (target: StopTarget): string => target.shellId ?? `pgid:${target.pgid}`

const mainPath = fileURLToPath(new URL("./internal/watcherMain.js", import.meta.url))

const startProcess = (args: string): ChildProcess => {
  const env = { ...process.env }
  delete env.CORRAL_SHELL_ID
  const child = spawn(process.execPath, [mainPath, args], {
    detached: true,
    // stdin: the announcements; stdout: "ready" once it can stop groups at once
    stdio: ["pipe", "pipe", "ignore"],
    env
  })
  // a watcher that could not start is told of where it is replaced (`replaceWhenDead`), not as an uncaught error
  child.on("error", () => {})
  child.unref()
  // the pipe is the supervisor's lifeline to the watcher, not a reason to stay alive. A spawn that found no
  // descriptor for them (EMFILE) made none: it only tells of that in its error event
  for (const pipe of [child.stdin, child.stdout]) (pipe as (Stream & { unref?: () => void }) | null)?.unref?.()
  child.stdin?.on("error", () => {})
  return child
}

// the schema's encoded form is its type (no transformation): JSON.stringify is its encoding, without loading Schema here
const lineOf = (message: typeof Message.WatcherMessage.Encoded) => JSON.stringify(message) + "\n"

const write = (child: ChildProcess, lines: string) => {
  if (lines !== "" && child.stdin?.writable) child.stdin.write(lines)
}

/** Why a process never started: Node gives its exit code as the spawn's negated errno. */
const startFailure = (child: ChildProcess) =>
  child.exitCode !== null && child.exitCode < 0 ? getSystemErrorName(child.exitCode) : `exit code ${child.exitCode}`

/** Waits until the watcher process has ended, or could not start; says how. */
const ended = (child: ChildProcess) =>
  Effect.async<string>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.signalCode ?? `exit ${child.exitCode}`))
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => resume(Effect.succeed(signal ?? `exit ${code}`))
    const onError = (error: Error) => resume(Effect.succeed(error.message))
    child.once("exit", onExit)
    child.once("error", onError)
    return Effect.sync(() => {
      child.off("exit", onExit)
      child.off("error", onError)
    })
  })

/** Waits until the watcher has loaded its stop code, or has ended. */
const ready = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    // one that could not start, or ended already, has told all it will
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    const done = () => resume(Effect.void)
    child.stdout?.once("data", done)
    child.once("exit", done)
    child.once("error", done)
    return Effect.sync(() => {
      child.stdout?.off("data", done)
      child.off("exit", done)
      child.off("error", done)
    })
  })

/** A watcher that dies sooner than this after its start is not replaced sooner than this either. */
const restartInterval = Duration.seconds(1)

/** The watcher's argument: the bounds of the stops it makes. */
const argsOf = (limits: LimitsShape) =>
  JSON.stringify({
    grace: Duration.toMillis(limits.grace),
    killTimeout: Duration.toMillis(limits.killTimeout),
    killInterval: Duration.toMillis(limits.killInterval)
  } satisfies typeof Message.WatcherLimits.Encoded)

/** Cgroup cells watched as a whole (see `watchCells`): one target, announced with the first target in them. */
interface CellsWatch {
  readonly key: string
  readonly target: StopTarget
  announced: boolean
}

/**
 * One supervisor's watcher: the process now, what it was told, for a
 * replacement, and what it is yet to be told. Every change to it is one
 * synchronous step, so no fiber ever sees it half changed.
 */
interface State {
  readonly args: string
  readonly watched: Map<string, StopTarget>
  // announced with the first target in them, so that a watcher whose supervisor never starts a shell does not
  // load its stop code
  readonly cellsWatched: Array<CellsWatch>
  // encoded when written: a start's pid update costs its path no JSON
  pending: Array<WatcherMessage>
  flushScheduled: boolean
  current: ChildProcess
  // set while the watcher was ended on purpose (endIfIdle): its death is not replaced until an add revives it
  retired: Deferred.Deferred<void> | undefined
  // set while no watcher could start: tried again after each `restartInterval`, said once, and once more when one starts
  failing: boolean
}

/** A watcher process started now, told nothing yet. */
const start = (args: string): State => ({
  args,
  watched: new Map(),
  cellsWatched: [],
  pending: [],
  flushScheduled: false,
  current: startProcess(args),
  retired: undefined,
  failing: false
})

/** The groups watched, not counting the cells watched as a whole. */
const groupsWatched = (state: State) => state.watched.size - state.cellsWatched.filter((c) => c.announced).length

const flush = (state: State) => {
  write(state.current, state.pending.map(lineOf).join(""))
  state.pending = []
}

/** A new watcher process, told every group still announced (what was pending is in `watched` already). */
const restart = (state: State) => {
  state.current = startProcess(state.args)
  state.pending = []
  write(state.current, [...state.watched].map(([key, target]) => lineOf({ op: "add", key, target })).join(""))
  return state.current
}

/** Sends `message` now, or with the batch written once the current tick's work is done. */
const enqueue = (state: State, message: WatcherMessage, now: boolean) => {
  state.pending.push(message)
  if (now) return flush(state)
  if (state.flushScheduled) return
  state.flushScheduled = true
  setImmediate(() => {
    state.flushScheduled = false
    flush(state)
  })
}

/**
 * The supervisor's release: kills a watcher with nothing to watch; else
 * closes its pipe after the last batch, so that it stops what is left. Waits
 * for its exit either way.
 */
const release = (state: State) =>
  Effect.asVoid(bounded(Effect.async<void>((resume) => {
    const child = state.current
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.ref() // keep this process alive until the watcher has gone
    if (groupsWatched(state) === 0) {
      child.kill("SIGKILL")
    } else {
      flush(state)
      child.stdin?.end()
    }
  }), Duration.seconds(5)))

/** A watcher that cannot stay up is not restarted in a tight loop: waits out the rest of `restartInterval` since its start. */
const pauseSince = (startedAt: number) =>
  Effect.gen(function*() {
    const lived = Duration.millis((yield* Monotonic.millis) - startedAt)
    if (Duration.lessThan(lived, restartInterval)) yield* Effect.sleep(Duration.subtract(restartInterval, lived))
  })

const replacedMessage = (state: State, dead: ChildProcess, how: string, replacement: ChildProcess) =>
  state.failing
    ? `the watcher started (pid ${replacement.pid}) after it could not: it watches the ${groupsWatched(state)} group(s) running`
    : `the watcher (pid ${dead.pid}) ended (${how}); ` +
      `its replacement (pid ${replacement.pid}) watches the ${groupsWatched(state)} group(s) still running`

/** Waits for the death of the watcher process now, and replaces it, told every group still announced. */
const replaceWhenDead = (state: State) =>
  Effect.gen(function*() {
    const child = state.current
    const startedAt = yield* Monotonic.millis
    const how = yield* ended(child)
    // ended on purpose (endIfIdle) is no death: no replacement until an add needs one, and that add starts it
    if (state.retired !== undefined) yield* Deferred.await(state.retired)
    if (state.current !== child) return
    if (child.pid === undefined && !state.failing) {
      state.failing = true
      yield* Effect.logWarning(
        `the watcher could not start: ${SpawnFailure.describe(startFailure(child), "the watcher's pipes")}; ` +
          "until it can, shells keep running if this process is killed"
      )
    }
    yield* pauseSince(startedAt)
    const replacement = yield* Effect.sync(() => restart(state))
    // a watcher with nothing to stop loads no stop code, and so never says it is ready
    if (state.watched.size > 0) yield* Effect.timeout(ready(replacement), Duration.seconds(10)).pipe(Effect.ignore)
    // one that could not start said so (once in a row); the next is tried a `restartInterval` later
    if (replacement.pid === undefined) return
    yield* Effect.logWarning(replacedMessage(state, child, how, replacement))
    state.failing = false
  })

/**
 * Announces the cells watched as a whole that `target` is in, if it is their
 * first target. Says whether `target` must reach the watcher now, before its
 * spawn: in cells already announced, it need not.
 */
const announceCellsOf = (state: State, target: StopTarget) => {
  const cells = state.cellsWatched.find((c) => target.cgroup?.startsWith(`${c.target.cgroup}/`))
  const announcing = cells !== undefined && !cells.announced
  if (announcing) {
    cells.announced = true
    state.watched.set(cells.key, cells.target)
    if (state.retired === undefined) enqueue(state, { op: "add", key: cells.key, target: cells.target }, false)
  }
  return cells === undefined || announcing
}

/** Ended on purpose and watched again: a new watcher, told everything, and replaced if it dies. */
const revive = (state: State, revival: Deferred.Deferred<void>) => {
  state.retired = undefined
  restart(state)
  Deferred.unsafeDone(revival, Effect.void)
}

const add = (state: State, key: string, target: StopTarget) =>
  Effect.sync(() => {
    const now = announceCellsOf(state, target)
    state.watched.set(key, target)
    if (state.retired === undefined) return enqueue(state, { op: "add", key, target }, now)
    revive(state, state.retired)
  })

const update = (state: State, key: string, target: StopTarget) =>
  Effect.sync(() => {
    state.watched.set(key, target)
    enqueue(state, { op: "add", key, target }, false)
  })

const unsafeRemove = (state: State, key: string) => {
  if (state.watched.delete(key)) enqueue(state, { op: "remove", key }, false)
}

const remove = (state: State, key: string) => Effect.sync(() => unsafeRemove(state, key))

const watchCells = (state: State, cells: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      // a group id of 0 names no group: the cells' processes are found by cgroup alone
      const watch: CellsWatch = { key: `cells:${cells}`, target: { pgid: 0, sid: 0, startTime: 0, cgroup: cells }, announced: false }
      state.cellsWatched.push(watch)
      return watch
    }),
    (watch) =>
      Effect.zipRight(
        Effect.sync(() => state.cellsWatched.splice(state.cellsWatched.indexOf(watch), 1)),
        watch.announced ? remove(state, watch.key) : Effect.void
      )
  )

const endIfIdle = (state: State) =>
  Effect.sync(() => {
    const child = state.current
    if (groupsWatched(state) > 0 || state.retired !== undefined || child.exitCode !== null || child.signalCode !== null) return
    state.retired = Deferred.unsafeMake<void>(FiberId.none)
    state.pending = []
    child.kill("SIGKILL")
  })

/**
 * Starts the watcher for this supervisor, and another whenever it dies (kill
 * -9 by someone, the OOM killer): the replacement is told every group still
 * announced, so a SIGKILL of the supervisor stops them all the same.
 *
 * Releasing it with nothing left to watch kills it, which is at once; with
 * groups still announced it closes the pipe, so the watcher stops them.
 * Either way the release waits for its exit: no watcher outlives a clean
 * supervisor, or becomes a zombie of a PID 1 that never reaps. A registry's
 * shutdown kills it earlier (`endIfIdle`, once its stops left nothing to
 * watch), so that the release finds it gone or going.
 */
export const make = Effect.gen(function*() {
  const args = argsOf(yield* Limits)
  const state = yield* Effect.acquireRelease(Effect.sync(() => start(args)), release)
  // forked after the release above is registered, so interrupted before it runs: a release is no death
  yield* Effect.forkScoped(Effect.forever(replaceWhenDead(state)))
  return Watcher.of({
    pid: Effect.sync(() => state.current.pid ?? 0),
    add: (key, target) => add(state, key, target),
    update: (key, target) => update(state, key, target),
    remove: (key) => remove(state, key),
    unsafeRemove: (key) => unsafeRemove(state, key),
    guard: (target) => Effect.acquireRelease(add(state, keyOf(target), target), () => remove(state, keyOf(target))),
    watchCells: (cells) => watchCells(state, cells),
    endIfIdle: endIfIdle(state)
  })
})
