/**
 * The watcher: a process of its own that stops the groups it was told of
 * when the supervisor dies without stopping them itself, however it dies
 * (SIGKILL included). See `internal/watcherMain.ts`.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { Writable } from "node:stream"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { StopTarget } from "./GroupStop.js"
import { Limits } from "./Limits.js"

/** Targets are known by key: an add of the same key replaces what the watcher knew. */
export type WatcherMessage =
  | { readonly op: "add"; readonly key: string; readonly target: StopTarget }
  | { readonly op: "remove"; readonly key: string }

/**
 * The watcher of this supervisor. `ProcessGroup.spawn` uses it when it is
 * provided: it announces a shell before spawning it (by tag and cgroup, the
 * pid is not known yet), again once it has a pid, and withdraws it after
 * the shell's stop, so there is no moment when a shell runs unwatched.
 */
export class Watcher extends Context.Tag("@corral/core/Watcher")<Watcher, {
  readonly pid: number
  readonly add: (key: string, target: StopTarget) => Effect.Effect<void>
  readonly remove: (key: string) => Effect.Effect<void>
  /** Watches the group for the scope's lifetime. */
  readonly guard: (target: StopTarget) => Effect.Effect<void, never, Scope.Scope>
}>() {}

/** The key of a target: its tag where it has one (known before its pid), else its group. */
export const keyOf = (target: StopTarget): string => target.shellId ?? `pgid:${target.pgid}`

const mainPath = fileURLToPath(new URL("./internal/watcherMain.js", import.meta.url))

/**
 * Starts the watcher for this supervisor. Releasing it with nothing left to
 * watch kills it, which is at once; with groups still announced it closes
 * the pipe, so the watcher stops them. Either way the release waits for its
 * exit: no watcher outlives a clean supervisor, or becomes a zombie of a PID
 * 1 that never reaps.
 */
export const make = Effect.gen(function*() {
  const limits = yield* Limits
  const args = JSON.stringify({
    grace: Duration.toMillis(limits.grace),
    killTimeout: Duration.toMillis(limits.killTimeout),
    killInterval: Duration.toMillis(limits.killInterval)
  })
  const watched = new Set<string>()
  const child = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const env = { ...process.env }
      delete env.CORRAL_SHELL_ID
      const child = spawn(process.execPath, [mainPath, args], {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"],
        env
      })
      child.unref()
      // the pipe is the supervisor's lifeline to the watcher, not a reason to stay alive
      ;(child.stdin as Writable & { unref?: () => void }).unref?.()
      child.stdin!.on("error", () => {})
      child.on("error", (error) => {
        process.emitWarning(`corral: the watcher could not start (${error.message}): shells will not be stopped if this process is killed`)
      })
      return child
    }),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.ref() // keep this process alive until the watcher has gone
        if (watched.size === 0) child.kill("SIGKILL")
        else child.stdin!.end()
      }).pipe(Effect.timeout(Duration.seconds(5)), Effect.ignore)
  )
  const send = (message: WatcherMessage) =>
    Effect.sync(() => {
      if (child.stdin!.writable) child.stdin!.write(JSON.stringify(message) + "\n")
    })
  const add = (key: string, target: StopTarget) => Effect.zipRight(Effect.sync(() => watched.add(key)), send({ op: "add", key, target }))
  const remove = (key: string) => Effect.zipRight(Effect.sync(() => watched.delete(key)), send({ op: "remove", key }))
  return Watcher.of({
    pid: child.pid ?? 0,
    add,
    remove,
    guard: (target) => Effect.acquireRelease(add(keyOf(target), target), () => remove(keyOf(target)))
  })
})
