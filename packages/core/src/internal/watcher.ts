import { spawn } from "node:child_process"
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

const mainPath = new URL("./watcherMain.js", import.meta.url)

/**
 * Starts the watcher for this supervisor. Releasing it closes the pipe, so a
 * clean shutdown (after every group was removed) lets the watcher exit idle.
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
      const child = spawn(process.execPath, [mainPath.pathname, args], {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"],
        env
      })
      child.unref()
      // the pipe is the supervisor's lifeline to the watcher, not a reason to stay alive
      ;(child.stdin as Writable & { unref?: () => void }).unref?.()
      child.stdin!.on("error", () => {})
      child.on("error", () => {})
      return child
    }),
    (child) => Effect.sync(() => child.stdin!.end())
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
