// The supervisor dies by SIGKILL, so no finalizer runs: its watcher process,
// seeing EOF on the pipe only the supervisor held, must stop every shell.
import { spawn } from "node:child_process"
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, failure, GRACE_MS, waitFor } from "../lib/harness.mjs"
import { SHELLS } from "../supervisor.mjs"

const supervisorPath = new URL("../supervisor.mjs", import.meta.url).pathname
const BOUND_MS = GRACE_MS + 1000

export default {
  id: "supervisor-kill",
  summary: `kill -9 of a supervisor with ${SHELLS.length} live shells; watcher empties them within grace + 1 s`,
  orphans: true,
  timeoutMs: 60_000,
  run: (ctx) =>
    Effect.scoped(Effect.gen(function*() {
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, [supervisorPath, ctx.stateDir, ctx.backend], { stdio: ["ignore", "pipe", "inherit"] })),
        (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
      )
      const { shells } = JSON.parse(yield* firstLine(child))
      const watcher = yield* waitFor("the supervisor's watcher process", () =>
        Kernel.scan().find((p) => p.ppid === child.pid && Kernel.commandLine(p.pid).includes("watcherMain")))
      yield* awaitIdle(watcher.pid)
      const alive = shells.flatMap((s) => Kernel.liveMembers(s))
      const expected = SHELLS.reduce((n, s) => n + s.members, 0)
      yield* check(alive.length >= expected, `only ${alive.length} of ${expected} shell processes were running before the kill`)
      const killedAt = performance.now()
      child.kill("SIGKILL")
      const emptyMs = yield* waitFor(`every shell of the killed supervisor to be stopped by its watcher`, () =>
        shells.every((s) => Kernel.liveMembers(s).length === 0) ? performance.now() - killedAt : undefined, BOUND_MS + 10_000)
      ctx.record("kill-to-empty ms", emptyMs)
      yield* check(emptyMs <= BOUND_MS, `the watcher took ${Math.round(emptyMs)} ms to stop ${alive.length} processes, over grace + 1 s (${BOUND_MS} ms)`)
      yield* waitFor(`watcher ${watcher.pid} to exit after its stop`, () => (isLive(watcher.pid) ? undefined : true), 5000)
    }))
}

const isLive = (pid) => {
  const p = Kernel.processInfo(pid)
  return p !== undefined && Kernel.isAlive(p)
}

const firstLine = (child) =>
  Effect.async((resume) => {
    let text = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk) => {
      text += chunk
      if (text.includes("\n")) resume(Effect.succeed(text.slice(0, text.indexOf("\n"))))
    })
    child.once("exit", (code, signal) => resume(failure(`the supervisor exited (${signal ?? code}) before its shells were ready`)))
  }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => failure("the supervisor did not report its shells within 30 s") }))

/**
 * The watcher must have loaded before the kill, as it would have in any
 * supervisor that ran for more than a moment: its CPU time stops moving
 * and it sleeps in its event loop.
 */
const awaitIdle = (pid) =>
  Effect.gen(function*() {
    let last = -1
    let still = 0
    while (still < 3) {
      yield* Effect.sleep(50)
      const p = Kernel.processInfo(pid)
      if (p === undefined) return yield* failure(`watcher ${pid} died before the supervisor was killed`)
      still = p.state === "S" && p.cpuTicks === last ? still + 1 : 0
      last = p.cpuTicks
    }
  }).pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => failure(`watcher ${pid} never went idle`) }))
