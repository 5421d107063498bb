// corral inside corral: the outer `corral run` stops its group with a short
// grace while the inner one, with a TERM-ignoring CMD and its default 3 s
// grace, is still stopping its own. The inner corral's watcher is in a
// session of its own; the inner CMD carries the outer's shell id only in
// CORRAL_SHELL_IDS (and, with cgroups, sits in a cgroup nested in the
// outer's). When the outer has exited, nothing of either may be left.
//
// Every iteration runs the outer with --timeout 0.5s and expects 124. Two
// Node start-ups rarely fit in 0.5 s, so the inner CMD seldom runs by then
// (the "inner CMD ran" figure says how often): even iterations also run the
// outer without a timeout, wait until the inner CMD runs, and SIGTERM the
// outer, which stops its group the same way and exits 128+N.
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Kernel from "../lib/kernel.mjs"
import { check, corralBin, markedToken, spawnCorral, staysGone, waitFor } from "../lib/harness.mjs"

const inner = (token) => [process.execPath, corralBin, "run", "--timeout", "60s", "--", "sh", "-c", `trap "" TERM; sleep 6${token} & wait`]

const innerSleep = (token) => Kernel.liveMarked([token]).find((p) => p.comm === "sleep")

const nothingLeft = (what, token) =>
  Effect.gen(function*() {
    const left = Kernel.liveMarked([token])
    yield* check(left.length === 0, `${what} while ${left.length} process(es) were alive: ${left.map(Kernel.describe).join("; ")}`)
    yield* staysGone(`after ${what}`, token)
  })

const timedOut = (ctx) =>
  Effect.scoped(Effect.gen(function*() {
    const token = yield* markedToken(ctx)
    const outer = yield* spawnCorral(ctx, token, ["run", "--timeout", "0.5s", "--grace", "0.3s", "--", ...inner(token)])
    let innerRan = false
    const watching = yield* Effect.fork(Effect.gen(function*() {
      while (!innerRan) {
        innerRan = innerSleep(token) !== undefined
        yield* Effect.sleep(5)
      }
    }))
    const { code, signal } = yield* outer.exited
    yield* Fiber.interrupt(watching)
    yield* check(code === 124, `the outer corral run exited ${signal ?? code}, not 124 (timed out): ${outer.stderr()}`)
    yield* nothingLeft("the outer corral run exited 124", token)
    ctx.record("inner CMD ran (timeout 0.5s)", innerRan ? 1 : 0)
  }))

const terminated = (ctx) =>
  Effect.scoped(Effect.gen(function*() {
    const token = yield* markedToken(ctx)
    const outer = yield* spawnCorral(ctx, token, ["run", "--grace", "0.3s", "--", ...inner(token)])
    const began = performance.now()
    yield* waitFor(`the inner CMD's sleep 6${token}`, () => innerSleep(token), 20_000)
    ctx.record("inner CMD up ms", performance.now() - began)
    outer.child.kill("SIGTERM")
    const { code, signal } = yield* outer.exited
    // CMD is the inner corral: the outer's stop ends it with SIGTERM or, after the grace, SIGKILL
    yield* check(code === 143 || code === 137, `the outer corral run exited ${signal ?? code} on SIGTERM, not 143 or 137: ${outer.stderr()}`)
    yield* nothingLeft(`the outer corral run exited ${code} on SIGTERM`, token)
  }))

export default {
  id: "nested-corral",
  summary: "corral run --timeout 0.5s --grace 0.3s -- corral run --timeout 60s -- sh -c 'trap \"\" TERM; sleep 6<token> & wait' (+ SIGTERM once the inner CMD runs)",
  orphans: true,
  timeoutMs: 60_000,
  run: (ctx) => (ctx.iteration % 2 === 0 ? Effect.zipRight(timedOut(ctx), terminated(ctx)) : timedOut(ctx))
}
