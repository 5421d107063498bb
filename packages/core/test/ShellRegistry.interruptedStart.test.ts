/**
 * A start interrupted at any step (an MCP client cancelling a `bash` call,
 * a caller's timeout): afterwards the shell is either registered, listed and
 * stoppable, or nothing of it runs. Never a command running that the
 * registry does not list, which no `kill_bash` could reach while its
 * supervisor lives.
 */
import { ShellRegistry } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { eventually, nothingLeft, ownShellPrefix, registryLayer, shellProcesses } from "./fixtures/registry/harness.js"
import { environOf, inPidNamespace } from "./helpers.js"

const owner = "interrupt-test"

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

/** Interrupts a start after `yields` turns of the scheduler, or after `ms` of real time; returns whether the start got through. */
const interruptedStart = (registry: ShellRegistry["Type"], at: { readonly yields: number } | { readonly ms: number }) =>
  Effect.gen(function*() {
    const starting = yield* Effect.fork(registry.start({ command: ["sleep", "300"] }, { owner }))
    if ("yields" in at) for (let i = 0; i < at.yields; i++) yield* Effect.yieldNow()
    else yield* Effect.sleep(Duration.millis(at.ms))
    const exit = yield* Fiber.interrupt(starting)
    return Exit.isSuccess(exit)
  })

/** Processes of this registry's shells that it does not list: a leak while the supervisor lives. */
const unlisted = (registry: ShellRegistry["Type"]) =>
  Effect.map(registry.list, (listed) => {
    const ids = new Set(listed.map((s) => s.id))
    return shellProcesses(ownShellPrefix).filter((p) => {
      const tag = environOf(p.pid).get("CORRAL_SHELL_ID") ?? ""
      return !ids.has(tag.slice(tag.lastIndexOf(":") + 1))
    })
  })

describe.skipIf(!inPidNamespace)("a start interrupted at any step (needs the PID namespace of npm test)", () => {
  it.live("leaves the shell registered, or nothing of it running", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const points = [
        ...Array.from({ length: 40 }, (_, yields) => ({ yields })),
        ...[0, 1, 2, 3, 4, 6, 8, 12].map((ms) => ({ ms }))
      ]
      let through = 0
      for (const at of points) {
        if (yield* interruptedStart(registry, at)) through++
        // every shell a start got through is listed: stop them all, then nothing of this registry may run
        for (const shell of yield* registry.list) if (shell.status._tag === "Running") yield* registry.kill(shell.id, { owner })
        yield* eventually(`no unlisted process after a start interrupted at ${JSON.stringify(at)}`, Effect.map(unlisted(registry), (left) => left.length === 0 ? true : undefined), 2_000)
      }
      // the interrupts landed on both sides of the registration
      expect(through).toBeGreaterThan(0)
      expect(through).toBeLessThan(points.length)
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 64 } }))), 60_000)
})
