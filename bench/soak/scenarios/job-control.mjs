// `set -m` puts each job in its own process group inside the session: kill(-pgid) alone misses it.
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, killConfirmed, start, waitFor, withRegistry } from "../lib/harness.mjs"

export default {
  id: "job-control",
  summary: "bash -c 'set -m; sleep 50 & wait': the job has its own group",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const shell = yield* start("set -m; sleep 50 & wait", { shell: "/bin/bash" })
      const job = yield* waitFor("the background job in a group of its own", () =>
        Kernel.liveMembers(shell).find((p) => p.comm === "sleep" && p.pgid !== shell.pid))
      yield* check(job.sid === shell.pid, `the job left the session (sid ${job.sid}); the scenario did not set up what it tests`)
      const report = yield* killConfirmed(shell)
      yield* check(!report.escalated, `bash and its job obey SIGTERM, yet the stop escalated: ${JSON.stringify(report)}`)
      ctx.record("stop ms", report.durationMs)
    }))
}
