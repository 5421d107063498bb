// `corral run` dies by SIGKILL while CMD, which ignores SIGTERM, runs: no
// finalizer of corral's runs, so its watcher, seeing EOF on the pipe only
// corral held, must stop CMD's group and then exit.
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, failure, markedToken, spawnCorral, staysGone, waitFor } from "../lib/harness.mjs"

const GRACE_MS = 300
const BOUND_MS = GRACE_MS + 1500

export default {
  id: "corral-run-sigkill",
  summary: `kill -9 of corral run --grace 0.3s -- sh -c 'trap "" TERM; sleep 6<token> & wait'; nothing left within grace + 1.5 s`,
  orphans: true,
  run: (ctx) =>
    Effect.scoped(Effect.gen(function*() {
      const token = yield* markedToken(ctx)
      const corral = yield* spawnCorral(ctx, token, [
        "run", "--grace", `${GRACE_MS / 1000}s`, "--", "sh", "-c", `trap "" TERM; sleep 6${token} & wait`
      ])
      yield* waitFor(`CMD's sleep 6${token} to run`, () => Kernel.liveMarked([token]).find((p) => p.comm === "sleep"))
      yield* check(corral.child.exitCode === null, `corral run exited (${corral.child.exitCode}) before it was killed: ${corral.stderr()}`)
      const isWatcher = (p) => Kernel.commandLine(p.pid).includes("watcherMain")
      const watcher = Kernel.liveMarked([token]).find(isWatcher)
      yield* check(watcher !== undefined, `corral run ${corral.child.pid} runs CMD without a watcher process`)
      // how far the watcher had got: it loads the stop code (Effect) after it starts reading its pipe
      const watcherCpuMs = (Kernel.processInfo(watcher.pid)?.cpuTicks ?? 0) * 10
      const killedAt = performance.now()
      corral.child.kill("SIGKILL")
      let groupEmptyMs
      const emptyMs = yield* waitFor(
        `everything of the killed corral run (its watcher, CMD, the sleep) to be gone`,
        () => {
          const live = Kernel.liveMarked([token])
          if (groupEmptyMs === undefined && !live.some((p) => !isWatcher(p))) groupEmptyMs = performance.now() - killedAt
          return live.length === 0 ? performance.now() - killedAt : undefined
        },
        BOUND_MS + 10_000
      ).pipe(Effect.catchTag("SoakFailure", (e) => failure(`${e.message}; alive: ${Kernel.liveMarked([token]).map(Kernel.describe).join("; ")}`)))
      ctx.record("kill-to-empty ms", emptyMs)
      ctx.record("kill-to-CMD-gone ms", groupEmptyMs)
      ctx.record("watcher CPU ms at the kill", watcherCpuMs)
      yield* check(
        emptyMs <= BOUND_MS,
        `${Math.round(emptyMs)} ms from the SIGKILL of corral run until nothing of it was left, over grace + 1.5 s (${BOUND_MS} ms): ` +
          `CMD's processes were gone after ${Math.round(groupEmptyMs)} ms, the watcher after ${Math.round(emptyMs)} ms; ` +
          `the watcher had used ${watcherCpuMs} ms of CPU when corral run was killed`
      )
      yield* staysGone("after the killed corral run's watcher stopped its group", token)
    }))
}
