// A member stopped with SIGSTOP does not act on SIGTERM until it gets SIGCONT.
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, killConfirmed, start, waitFor, withRegistry } from "../lib/harness.mjs"

export default {
  id: "stopped-member",
  summary: "one sleep of the group stopped with SIGSTOP",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start("sleep 60 & sleep 60 & wait")
      const [victim] = yield* waitFor("the group's two sleeps", () => {
        const sleeps = Kernel.liveMembers(shell).filter((p) => p.comm === "sleep")
        return sleeps.length === 2 ? sleeps : undefined
      })
      process.kill(victim.pid, "SIGSTOP")
      yield* waitFor(`sleep ${victim.pid} to be stopped`, () => (Kernel.processInfo(victim.pid)?.state === "T" ? true : undefined))
      const report = yield* killConfirmed(shell)
      yield* check(!report.escalated, `SIGCONT should let the stopped member act on SIGTERM, yet the stop escalated: ${JSON.stringify(report)}`)
      ctx.record("stop ms", report.durationMs)
    }))
}
