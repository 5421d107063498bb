// A TERM-ignoring loop that keeps forking while it is being stopped.
import * as Effect from "effect/Effect"
import { check, killConfirmed, start, waitForMembers, withRegistry } from "../lib/harness.mjs"

const GROWN_TO = 150

export default {
  id: "forker",
  summary: `TERM-ignoring loop forking sleeps, stopped at ${GROWN_TO}+ processes`,
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start("trap '' TERM; while :; do sleep 60 & sleep 60 & sleep 60 & sleep 0.01; done")
      yield* waitForMembers(shell, GROWN_TO, 20_000)
      const report = yield* killConfirmed(shell)
      yield* check(report.escalated && report.signals.SIGKILL > 0, `a TERM-ignoring forker was not escalated: ${JSON.stringify(report)}`)
      ctx.record("processes", report.members)
      ctx.record("stop ms", report.durationMs)
    }))
}
