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
import { Limits } from "./Limits.js"

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
  const limits = yield* Limits
  const args = JSON.stringify({
    grace: Duration.toMillis(limits.grace),
    killTimeout: Duration.toMillis(limits.killTimeout),
    killInterval: Duration.toMillis(limits.killInterval)
  } satisfies typeof Message.WatcherLimits.Encoded)
  // what the watcher was told, for a replacement, and what it is yet to be told;
  // every change to them, and to `current`, is one synchronous step
  const watched = new Map<string, StopTarget>()
  // cgroups whose cells are watched as a whole (see watchCells), announced with the first target in them, so
  // that a watcher whose supervisor never starts a shell does not load its stop code
  const cellsWatched: Array<{ readonly key: string; readonly target: StopTarget; announced: boolean }> = []
  /** The groups watched, not counting the cells watched as a whole. */
  const groupsWatched = () => watched.size - cellsWatched.filter((c) => c.announced).length
  // set while the watcher was ended on purpose (endIfIdle): its death is not replaced until an add revives it
  let retired: Deferred.Deferred<void> | undefined
  // encoded when written: a start's pid update costs its path no JSON
  let pending: Array<WatcherMessage> = []
  let flushScheduled = false
  let current: ChildProcess
  const flush = () => {
    write(current, pending.map(lineOf).join(""))
    pending = []
  }
  /** A new watcher process, told every group still announced (what was pending is in `watched` already). */
  // set while no watcher could start: tried again after each `restartInterval`, said once, and once more when one starts
  let failing = false
  const restart = () => {
    current = startProcess(args)
    pending = []
    write(current, [...watched].map(([key, target]) => lineOf({ op: "add", key, target })).join(""))
    return current
  }
  const enqueue = (message: WatcherMessage, now: boolean) => {
    pending.push(message)
    if (now) return flush()
    if (flushScheduled) return
    flushScheduled = true
    setImmediate(() => {
      flushScheduled = false
      flush()
    })
  }
  yield* Effect.acquireRelease(Effect.sync(() => (current = startProcess(args))), () =>
    Effect.asVoid(bounded(Effect.async<void>((resume) => {
      const child = current
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.ref() // keep this process alive until the watcher has gone
      if (groupsWatched() === 0) {
        child.kill("SIGKILL")
      } else {
        flush()
        child.stdin?.end()
      }
    }), Duration.seconds(5)))
  )

  const replaceWhenDead = Effect.gen(function*() {
    const child = current
    const startedAt = yield* Monotonic.millis
    const how = yield* ended(child)
    // ended on purpose (endIfIdle) is no death: no replacement until an add needs one, and that add starts it
    if (retired !== undefined) yield* Deferred.await(retired)
    if (current !== child) return
    if (child.pid === undefined && !failing) {
      failing = true
      yield* Effect.logWarning(
        `the watcher could not start: ${SpawnFailure.describe(startFailure(child), "the watcher's pipes")}; ` +
          "until it can, shells keep running if this process is killed"
      )
    }
    // a watcher that cannot stay up is not restarted in a tight loop
    const lived = Duration.millis((yield* Monotonic.millis) - startedAt)
    if (Duration.lessThan(lived, restartInterval)) yield* Effect.sleep(Duration.subtract(restartInterval, lived))
    const replacement = yield* Effect.sync(restart)
    // a watcher with nothing to stop loads no stop code, and so never says it is ready
    if (watched.size > 0) yield* Effect.timeout(ready(replacement), Duration.seconds(10)).pipe(Effect.ignore)
    // one that could not start said so (once in a row); the next is tried a `restartInterval` later
    if (replacement.pid === undefined) return
    yield* Effect.logWarning(
      failing
        ? `the watcher started (pid ${replacement.pid}) after it could not: it watches the ${groupsWatched()} group(s) running`
        : `the watcher (pid ${child.pid}) ended (${how}); ` +
          `its replacement (pid ${replacement.pid}) watches the ${groupsWatched()} group(s) still running`
    )
    failing = false
  })
  // forked after the release above is registered, so interrupted before it runs: a release is no death
  yield* Effect.forkScoped(Effect.forever(replaceWhenDead))

  const add = (key: string, target: StopTarget) =>
    Effect.sync(() => {
      const cells = cellsWatched.find((c) => target.cgroup?.startsWith(`${c.target.cgroup}/`))
      const announcing = cells !== undefined && !cells.announced
      if (announcing) {
        cells.announced = true
        watched.set(cells.key, cells.target)
        if (retired === undefined) enqueue({ op: "add", key: cells.key, target: cells.target }, false)
      }
      watched.set(key, target)
      // in cells already announced, the target need not reach the watcher before its spawn
      if (retired === undefined) return enqueue({ op: "add", key, target }, cells === undefined || announcing)
      // ended on purpose and watched again: a new watcher, told everything, and replaced if it dies
      const revival = retired
      retired = undefined
      restart()
      Deferred.unsafeDone(revival, Effect.void)
    })
  const update = (key: string, target: StopTarget) =>
    Effect.sync(() => {
      watched.set(key, target)
      enqueue({ op: "add", key, target }, false)
    })
  const unsafeRemove = (key: string) => {
    if (watched.delete(key)) enqueue({ op: "remove", key }, false)
  }
  const remove = (key: string) => Effect.sync(() => unsafeRemove(key))
  return Watcher.of({
    pid: Effect.sync(() => current.pid ?? 0),
    add,
    update,
    remove,
    unsafeRemove,
    guard: (target) => Effect.acquireRelease(add(keyOf(target), target), () => remove(keyOf(target))),
    watchCells: (cells) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          // a group id of 0 names no group: the cells' processes are found by cgroup alone
          const watch = { key: `cells:${cells}`, target: { pgid: 0, sid: 0, startTime: 0, cgroup: cells }, announced: false }
          cellsWatched.push(watch)
          return watch
        }),
        (watch) =>
          Effect.zipRight(
            Effect.sync(() => cellsWatched.splice(cellsWatched.indexOf(watch), 1)),
            watch.announced ? remove(watch.key) : Effect.void
          )
      ),
    endIfIdle: Effect.sync(() => {
      if (groupsWatched() > 0 || retired !== undefined || current.exitCode !== null || current.signalCode !== null) return
      retired = Deferred.unsafeMake<void>(FiberId.none)
      pending = []
      current.kill("SIGKILL")
    })
  })
})
