// corral inside corral: the outer `corral run` stops its group with a short
// grace while the inner one, with a TERM-ignoring CMD and its default 3 s
// grace, is still stopping its own. The inner corral's watcher is in a
// session of its own; the inner CMD carries the outer's shell id only in
// CORRAL_SHELL_IDS (and, with cgroups, sits in a cgroup nested in the
// outer's). When the outer has exited, nothing of either may be left.
//
// Every iteration runs the outer with --timeout 0.5s and expects 124 (or
// 137 when the inner corral had to be SIGKILLed, as timeout(1) says). Two
// Node start-ups rarely fit in 0.5 s, so the inner CMD seldom runs by then
// (the "inner CMD ran" figure says how often): even iterations also run the
// outer without a timeout, wait until the inner CMD runs, and SIGTERM the
// outer, which stops its group and exits 128+N or dies of the signal.
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
    // 124, or 137 when CMD (the inner corral, passing the SIGTERM on and waiting) needed SIGKILL, as timeout(1)
    yield* check(code === 124 || code === 137, `the outer corral run exited ${signal ?? code}, not 124 or 137 (timed out): ${outer.stderr()}`)
    yield* nothingLeft(`the outer corral run exited ${code}`, token)
    ctx.record("outer exit 137 (timeout 0.5s)", code === 137 ? 1 : 0)
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
    // CMD is the inner corral: the outer's stop ends it with SIGTERM or, after the grace, SIGKILL, and the
    // outer exits 128+N or, as timeout(1), dies of the same signal
    const status = signal ?? code
    yield* check(
      [143, 137, "SIGTERM", "SIGKILL"].includes(status),
      `the outer corral run ended with ${status} on SIGTERM, not 143, 137 or death by SIGTERM or SIGKILL: ${outer.stderr()}`
    )
    yield* nothingLeft(`the outer corral run ended with ${status} on SIGTERM`, token)
  }))

export default {
  id: "nested-corral",
  summary: "corral run --timeout 0.5s --grace 0.3s -- corral run --timeout 60s -- sh -c 'trap \"\" TERM; sleep 6<token> & wait' (+ SIGTERM once the inner CMD runs)",
  orphans: true,
  timeoutMs: 60_000,
  run: (ctx) => (ctx.iteration % 2 === 0 ? Effect.zipRight(timedOut(ctx), terminated(ctx)) : timedOut(ctx))
}
