import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { Writable } from "node:stream"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { StopTarget } from "../GroupStop.js"
import { Limits } from "../Limits.js"

export type WatcherMessage =
  | { readonly op: "add"; readonly target: StopTarget }
  | { readonly op: "remove"; readonly pgid: number }

export interface Watcher {
  readonly pid: number
  readonly add: (target: StopTarget) => Effect.Effect<void>
  readonly remove: (pgid: number) => Effect.Effect<void>
}

const mainPath = fileURLToPath(new URL("./watcherMain.js", import.meta.url))

/**
 * Starts the watcher for this supervisor. Releasing it closes the pipe, so a
 * clean shutdown (after every group was removed) lets the watcher exit idle;
 * the release waits for that exit, so no watcher outlives a clean supervisor.
 */
export const make = Effect.gen(function*() {
  const limits = yield* Limits
  const args = JSON.stringify({
    grace: Duration.toMillis(limits.grace),
    killTimeout: Duration.toMillis(limits.killTimeout),
    killInterval: Duration.toMillis(limits.killInterval)
  })
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
        child.stdin!.end()
      }).pipe(Effect.timeout(Duration.seconds(5)), Effect.ignore)
  )
  const send = (message: WatcherMessage) =>
    Effect.sync(() => {
      if (child.stdin!.writable) child.stdin!.write(JSON.stringify(message) + "\n")
    })
  return {
    pid: child.pid ?? 0,
    add: (target) => send({ op: "add", target }),
    remove: (pgid) => send({ op: "remove", pgid })
  } satisfies Watcher
})
