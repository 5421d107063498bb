// Processes that leave the session with setsid, one of them TERM-ignoring:
// reported in the stop report's `escaped`, and dead afterwards.
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, killConfirmed, start, waitFor, waitForMembers, withRegistry } from "../lib/harness.mjs"

export default {
  id: "setsid-escaper",
  summary: "setsid sleep, plus a double-forked TERM-ignoring daemon",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start(`setsid sleep 60 & setsid -f sh -c "trap '' TERM; sleep 60 & wait"; sleep 60`)
      // bash runs the last `sleep 60` in place of itself: four processes (five under sh)
      yield* waitForMembers(shell, 4)
      const escapers = yield* waitFor("3 escaped processes", () => {
        const out = Kernel.liveMembers(shell).filter((p) => p.sid !== shell.pid)
        return out.length >= 3 ? out : undefined
      })
      const report = yield* killConfirmed(shell)
      const unreported = escapers.filter((p) => !report.escaped.includes(p.pid))
      yield* check(
        unreported.length === 0,
        `escapers missing from the report's escaped ${JSON.stringify(report.escaped)}: ${unreported.map(Kernel.describe).join("; ")}`
      )
      const alive = escapers.filter((p) => Kernel.processInfo(p.pid) !== undefined && Kernel.isAlive(Kernel.processInfo(p.pid)))
      yield* check(alive.length === 0, `escapers not contained: ${alive.map(Kernel.describe).join("; ")}`)
      ctx.record("escaped", report.escaped.length)
      ctx.record("stop ms", report.durationMs)
    }))
}
