// A group that ignores SIGTERM (children inherit the ignored disposition): SIGKILL after the grace.
import * as Effect from "effect/Effect"
import { check, killConfirmed, start, waitForMembers, withRegistry } from "../lib/harness.mjs"

export default {
  id: "stubborn",
  summary: "TERM ignored by sh and its sleeps; escalates to SIGKILL",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start("trap '' TERM; sleep 60 & sleep 60 & wait")
      yield* waitForMembers(shell, 3)
      const report = yield* killConfirmed(shell)
      yield* check(report.escalated && report.signals.SIGKILL > 0, `a TERM-ignoring group was not escalated: ${JSON.stringify(report)}`)
      ctx.record("stop ms", report.durationMs)
    }))
}
