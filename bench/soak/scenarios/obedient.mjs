// A group that goes on SIGTERM: stopped within the grace, no SIGKILL.
import * as Effect from "effect/Effect"
import { check, killConfirmed, start, waitForMembers, withRegistry } from "../lib/harness.mjs"

export default {
  id: "obedient",
  summary: "sh with three sleeps; SIGTERM suffices",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start("sleep 60 & sleep 60 & sleep 60 & wait")
      yield* waitForMembers(shell, 4)
      const report = yield* killConfirmed(shell)
      yield* check(!report.escalated && report.signals.SIGKILL === 0, `an obedient group was escalated to SIGKILL: ${JSON.stringify(report)}`)
      ctx.record("stop ms", report.durationMs)
    }))
}
