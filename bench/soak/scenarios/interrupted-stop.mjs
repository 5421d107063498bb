// The caller of a stop is interrupted 50 ms in, while the grace runs: the
// interrupt returns at once, the stop runs to its end all the same, a second
// stop gets its report within grace + 1 s, and a third the same report. Once
// through ProcessGroup (group.stop()), once through the registry (kill).
import { ProcessGroup, ShellRegistry } from "@corral/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Kernel from "../lib/kernel.mjs"
import { check, failure, GRACE_MS, markedToken, OWNER, start, waitFor, withContainment, withRegistry } from "../lib/harness.mjs"

const BOUND_MS = GRACE_MS + 1000
// an interrupt that waited for the stop would take the grace
const INTERRUPT_MS = GRACE_MS / 2

const command = (token) => `trap '' TERM; sleep 6${token} & wait`

const awaitSleeper = (token) => waitFor(`the sleep 6${token}`, () => Kernel.liveMarked([token]).find((p) => p.comm === "sleep"))

/** Forks `stop`, interrupts it after 50 ms, then runs `stop` again: returns the second report. */
const interruptThenStop = (ctx, what, stop) =>
  Effect.gen(function*() {
    const caller = yield* Effect.fork(stop)
    yield* Effect.sleep(Duration.millis(50))
    const interruptAt = performance.now()
    yield* Fiber.interrupt(caller)
    const interruptMs = performance.now() - interruptAt
    ctx.record(`${what} interrupt ms`, interruptMs)
    yield* check(interruptMs <= INTERRUPT_MS, `interrupting the caller of ${what} took ${Math.round(interruptMs)} ms: it waited for the stop`)
    const againAt = performance.now()
    const report = yield* stop.pipe(Effect.timeoutFail({
      duration: Duration.millis(BOUND_MS),
      onTimeout: () => failure(`a second ${what} after an interrupted one did not return within grace + 1 s (${BOUND_MS} ms): wedged`)
    }))
    ctx.record(`${what} second stop ms`, performance.now() - againAt)
    yield* check(report.escalated, `the stop of a TERM-ignoring group did not escalate: ${JSON.stringify(report)}`)
    yield* check(report.containment === ctx.backend, `the stop ran on ${report.containment}, not ${ctx.backend}`)
    // the stop ran once: any later call answers with its report
    const third = yield* stop.pipe(Effect.timeoutFail({
      duration: Duration.millis(BOUND_MS),
      onTimeout: () => failure(`a third ${what} did not return within ${BOUND_MS} ms`)
    }))
    yield* check(
      JSON.stringify(third) === JSON.stringify(report),
      `a third ${what} answered another report than the second: ${JSON.stringify(third)} vs ${JSON.stringify(report)}`
    )
    return report
  })

const leftNothing = (what, token) => {
  const live = Kernel.liveMarked([token])
  return check(live.length === 0, `after ${what}, ${live.length} process(es) alive: ${live.map(Kernel.describe).join("; ")}`)
}

const viaGroup = (ctx) =>
  withContainment(ctx, Effect.gen(function*() {
    const token = yield* markedToken(ctx)
    const group = yield* ProcessGroup.spawn({ command: command(token) })
    yield* awaitSleeper(token)
    yield* interruptThenStop(ctx, "group.stop()", group.stop())
    yield* leftNothing("group.stop()", token)
  }))

const viaRegistry = (ctx) =>
  withRegistry(ctx, Effect.scoped(Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const token = yield* markedToken(ctx)
    const shell = yield* start(command(token))
    yield* awaitSleeper(token)
    yield* interruptThenStop(ctx, "registry.kill", registry.kill(shell.id, { owner: OWNER }))
    const info = yield* registry.info(shell.id)
    yield* check(info.status._tag === "Killed", `shell ${shell.id} is ${info.status._tag} after its kill, not Killed`)
    yield* leftNothing("registry.kill", token)
  })))

export default {
  id: "interrupted-stop",
  summary: "TERM-ignoring shell; its stop's caller interrupted after 50 ms; a second stop returns within grace + 1 s",
  orphans: true,
  run: (ctx) => Effect.zipRight(viaGroup(ctx), viaRegistry(ctx))
}
