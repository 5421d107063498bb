// What the scenarios share: a registry per iteration, checks that fail the
// iteration with a message, and waits on the kernel's own view of processes.
import { spawn } from "node:child_process"
import { Containment, isActive, Limits, ProcessTable, ShellRegistry } from "@corral/core"
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

/**
 * Containment for `ctx.backend` ("cgroup" or "procScan"; auto when absent),
 * with its process table and limits: what ProcessGroup.spawn needs.
 */
export const containmentLayer = (ctx, limits = {}) =>
  Containment.layer(ctx.backend).pipe(
    Layer.provideMerge(Layer.mergeAll(Limits.layerWith({ grace: Duration.millis(GRACE_MS), ...limits }), ProcessTable.layer))
  )

/** The registry under test, on `ctx.backend`, with its process table and limits, released when the iteration ends. */
export const registryLayer = (ctx, limits = {}) =>
  ShellRegistry.layer({ name: "corral-soak", stateDir: ctx.stateDir }).pipe(Layer.provideMerge(containmentLayer(ctx, limits)))

export const withRegistry = (ctx, program, limits) => Effect.provide(program, registryLayer(ctx, limits))

/** For scenarios that spawn process groups themselves: a scope, and containment on `ctx.backend`. */
export const withContainment = (ctx, program, limits) =>
  Effect.provide(Effect.scoped(program), containmentLayer(ctx, limits))

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

/** Waits until `count` processes of the command run; under pidns, `unshare` and the namespace's init come on top. */
export const waitForMembers = (shell, count, timeoutMs) => {
  const total = count + (shell.containment === "pidns" ? 2 : 0)
  return waitFor(`${total} live processes in shell ${shell.id} (${shell.command})`, () => {
    const live = Kernel.liveMembers(shell)
    return live.length >= total ? live : undefined
  }, timeoutMs)
}

export const start = (command, options = {}) =>
  Effect.flatMap(ShellRegistry, (registry) => registry.start({ command, ...options }, { owner: OWNER }))

/** Stops a shell through the registry, then checks with the kernel that nothing of it is alive. */
export const killConfirmed = (shell, tokens = []) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const report = yield* registry.kill(shell.id, { owner: OWNER })
    const live = Kernel.liveMembers(shell, tokens)
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

/** Fails at the first check, over `ms`, that finds a live process marked with the token: a surviving pid hopper keeps reappearing. */
export const staysGone = (what, token, ms = 300) =>
  Effect.gen(function*() {
    const until = performance.now() + ms
    do {
      const live = Kernel.liveMarked([token])
      if (live.length > 0) return yield* failure(`${what}: ${live.length} process(es) alive: ${live.map(Kernel.describe).join("; ")}`)
      yield* Effect.sleep(Duration.millis(10))
    } while (performance.now() < until)
  })

/**
 * A fresh token for what the scenario starts (`sleep 6<token>`, an
 * environment variable). Whatever carries it is counted by the runner's
 * leftover check after the iteration, then frozen and killed round after
 * round (a hopper forks between a scan and a kill): the scenario does not
 * kill it itself, so nothing it left is hidden from the count.
 */
export const markedToken = (ctx) => Effect.sync(() => ctx.token())

export const corralBin = new URL("../../../packages/cli/bin/corral.js", import.meta.url).pathname

/**
 * Runs the corral CLI (`node corral.js ...argv`) on `ctx.backend`, with the
 * token in its environment (CORRAL_SOAK_TOKEN), which its watcher and
 * children inherit. SIGKILLed when the scope closes if still running.
 */
export const spawnCorral = (ctx, token, argv) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, [corralBin, ...argv], {
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, CORRAL_CONTAINMENT: ctx.backend ?? "auto", CORRAL_SOAK_TOKEN: token }
      })
      let stderr = ""
      child.stderr.setEncoding("utf8")
      child.stderr.on("data", (chunk) => {
        if (stderr.length < 4096) stderr += chunk
      })
      const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
      return { child, exited: Effect.promise(() => exited), stderr: () => stderr.trim() }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )
