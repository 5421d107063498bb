// What the scenarios share: a registry per iteration, checks that fail the
// iteration with a message, and waits on the kernel's own view of processes.
import { isActive, Limits, ProcessTable, ShellRegistry } from "@corral/core"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Kernel from "./kernel.mjs"

/** Short enough that a stubborn group costs little per iteration, long enough to tell TERM from KILL. */
export const GRACE_MS = 500

export const OWNER = "soak"

/** An expectation the kernel or corral broke; fails the iteration with what was seen. */
export class SoakFailure extends Data.TaggedError("SoakFailure") {}

export const failure = (message) => new SoakFailure({ message })

/** The registry under test, with its process table and limits, released when the iteration ends. */
export const registryLayer = (ctx, limits = {}) =>
  ShellRegistry.layer({ name: "corral-soak", stateDir: ctx.stateDir }).pipe(
    Layer.provideMerge(Layer.mergeAll(Limits.layerWith({ grace: Duration.millis(GRACE_MS), ...limits }), ProcessTable.layer))
  )

export const withRegistry = (ctx, program, limits) => Effect.provide(program, registryLayer(ctx, limits))

export const check = (holds, message) => (holds ? Effect.void : failure(message))

/** Polls `probe` (a plain function) until it returns something other than undefined. */
export const waitFor = (what, probe, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const found = probe()
      if (found !== undefined) return found
      if (performance.now() > deadline) return yield* failure(`timed out after ${timeoutMs} ms waiting for ${what}`)
      yield* Effect.sleep(Duration.millis(5))
    }
  })

export const waitForMembers = (shell, count, timeoutMs) =>
  waitFor(`${count} live processes in shell ${shell.id} (${shell.command})`, () => {
    const live = Kernel.liveMembers(shell)
    return live.length >= count ? live : undefined
  }, timeoutMs)

export const start = (command, options = {}) =>
  Effect.flatMap(ShellRegistry, (registry) => registry.start({ command, ...options }, { owner: OWNER }))

/** Stops a shell through the registry, then checks with the kernel that nothing of it is alive. */
export const killConfirmed = (shell) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const report = yield* registry.kill(shell.id, { owner: OWNER })
    const live = Kernel.liveMembers(shell)
    yield* check(
      live.length === 0,
      `kill of ${shell.id} (${shell.command}) returned while ${live.length} of its processes were alive: ${live.map(Kernel.describe).join("; ")}`
    )
    yield* check(report.survivors.length === 0, `kill of ${shell.id} reported survivors ${report.survivors.join(", ")}`)
    return report
  })

export const awaitFinal = (shell, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const info = yield* registry.info(shell.id)
      if (!isActive(info.status)) return info
      if (performance.now() > deadline) {
        return yield* failure(`shell ${shell.id} (${shell.command}) still ${info.status._tag} after ${timeoutMs} ms`)
      }
      yield* Effect.sleep(Duration.millis(10))
    }
  })
