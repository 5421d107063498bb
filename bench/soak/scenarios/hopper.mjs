// A TERM-ignoring pid hopper: each process forks its successor and exits
// within a few milliseconds, so a pid seen in one scan is gone by the next.
// Stopped with a short grace; a hopper that survived would keep reappearing,
// so it must stay gone for 300 ms after the stop.
import { ShellRegistry } from "@corral/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, failure, killConfirmed, markedToken, start, staysGone, waitFor, withRegistry } from "../lib/harness.mjs"

const GRACE_MS = 200

const hopper = (token) => `export HOP='trap "" TERM; : ${token}; sleep 0.003; sh -c "$HOP" & exit 0'; sh -c "$HOP"; sleep 600`

export default {
  id: "hopper",
  summary: `TERM-ignoring pid hopper, stopped with a ${GRACE_MS} ms grace; stays gone 300 ms`,
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.scoped(Effect.gen(function*() {
      const token = yield* markedToken(ctx)
      const shell = yield* start(hopper(token))
      // hopping: two generations seen, then a while longer so it is well under way; only pids newer than the shell
      // are read: the hops of earlier iterations are zombies of the runner, thousands of them by the 20th
      const seen = new Set()
      yield* waitFor(`the hopper (token ${token}) to hop`, () => {
        for (const p of Kernel.liveMarked([token], shell.pid)) if (p.comm === "sh") seen.add(p.pid)
        return seen.size >= 3 ? true : undefined
      })
      yield* Effect.sleep(Duration.millis(50))
      // still hopping: a hop seen in the last 50 ms (one scan can fall on a hop in the middle of its exec, and miss it)
      const recent = new Set()
      let before = []
      for (let i = 0; i < 10; i++) {
        before = Kernel.liveMarked([token], shell.pid)
        for (const p of before) if (p.comm === "sh") recent.add(p.pid)
        yield* Effect.sleep(Duration.millis(5))
      }
      if (recent.size === 0) {
        const { text, info } = yield* (yield* ShellRegistry).output(shell.id, { mode: "all" })
        const table = Kernel.scan()
        return yield* failure(
          `the hopper had stopped hopping before the stop (${seen.size} hops seen): ${before.map(Kernel.describe).join("; ")}; ` +
            `its output: ${JSON.stringify(text.slice(-500))}; shell ${info.status._tag}; ` +
            `${table.length} processes here, ${table.filter(Kernel.isZombie).length} of them zombies`
        )
      }
      const report = yield* killConfirmed(shell, [token])
      yield* check(
        report.escalated && report.killed > 0,
        `a TERM-ignoring hopper was stopped without SIGKILL: ${JSON.stringify(report)}; ` +
          `${before.length} processes carried the token just before the stop: ${before.map(Kernel.describe).join("; ")}`
      )
      yield* check(report.containment === ctx.backend, `the stop of ${shell.id} ran on ${report.containment}, not ${ctx.backend}`)
      yield* staysGone(`the hopper after the stop of ${shell.id}`, token, 300)
      ctx.record("stop ms", report.durationMs)
    })), { grace: Duration.millis(GRACE_MS) })
}
