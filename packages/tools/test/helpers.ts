/**
 * Test helpers: a registry and the tool handlers over real processes, and an
 * independent look at /proc to check what the kernel says is left running.
 */
import * as fs from "node:fs"
import { Containment } from "@corral/core/Containment"
import { Limits } from "@corral/core/Limits"
import type { LimitsShape } from "@corral/core/Limits"
import { ProcessTable } from "@corral/core/ProcessTable"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import type { RegistryOptions } from "@corral/core/ShellRegistry"
import { PermissionGate } from "@corral/tools/PermissionGate"
import * as ShellTools from "@corral/tools/ShellTools"
import type { ToolError, ToolResult } from "@corral/tools/ToolResult"
import { expect } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * True inside the PID namespace `npm test` creates. Stopping a group kills
 * parents before their children, and on the machines corral is built on
 * PID 1 never reaps the orphans: outside a namespace they stay zombies.
 */
export const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"

export interface TestOptions {
  readonly owner?: string
  readonly cwd?: string
  readonly gate?: Layer.Layer<PermissionGate>
  readonly limits?: Partial<LimitsShape>
  readonly registry?: Omit<RegistryOptions, "crashSafety">
}

/** Handlers, registry, limits (a short grace) and the real process table. */
export const toolsLayer = (options: TestOptions = {}) => {
  const base = Containment.layer().pipe(Layer.provideMerge(Layer.merge(Limits.layerWith({ grace: Duration.millis(300), ...options.limits }), ProcessTable.layer)))
  return ShellTools.layer({ owner: options.owner ?? "test", cwd: options.cwd }).pipe(
    Layer.provideMerge(ShellRegistry.layer({ name: "tools test", ...options.registry, crashSafety: false })),
    Layer.provideMerge(options.gate ?? PermissionGate.layer),
    Layer.provideMerge(base)
  )
}

export type Call =
  | { readonly ok: true; readonly text: string; readonly metadata: ToolResult["metadata"] }
  | { readonly ok: false; readonly text: string; readonly reason: ToolError["reason"] }

/** Calls a tool through the toolkit, as a language model host would. */
export const call = (name: keyof ShellTools.Tools, params: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const built = yield* ShellTools.toolkit
    const { isFailure, result } = yield* built.handle(name, params as never)
    if (isFailure) {
      const error = result as ToolError
      return { ok: false, text: error.message, reason: error.reason } satisfies Call
    }
    const ok = result as ToolResult
    return { ok: true, text: ok.text, metadata: ok.metadata } satisfies Call
  })

const readText = (file: string) => {
  try {
    return fs.readFileSync(file, "latin1")
  } catch {
    return undefined
  }
}

const isAlive = (pid: string) => {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat === undefined) return false
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
  const threads = /^Threads:\s*(\d+)$/m.exec(readText(`/proc/${pid}/status`) ?? "")
  return !((state === "Z" || state === "X") && Number(threads?.[1] ?? 1) <= 1)
}

/** Live processes whose `CORRAL_SHELL_ID` starts with `prefix`, read straight from /proc. */
export const taggedProcesses = (prefix: string): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).filter((pid) => {
    const tag = (readText(`/proc/${pid}/environ`) ?? "").split("\0").find((kv) => kv.startsWith("CORRAL_SHELL_ID="))
    return tag !== undefined && tag.slice("CORRAL_SHELL_ID=".length).startsWith(prefix) && isAlive(pid)
  }).map(Number)

/** Processes this test process's shells (background and foreground) left alive. */
export const leftovers = () => taggedProcesses(`${process.pid}:`)

/** Runs `body` with fresh handlers and registry, then checks the kernel has none of their processes left. */
export const withTools = <A, E>(body: Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof toolsLayer>>>, options: TestOptions = {}) =>
  Effect.gen(function*() {
    const result = yield* Effect.provide(body, toolsLayer(options))
    expect(leftovers()).toEqual([])
    return result
  })

export const okText = (result: { readonly ok: boolean; readonly text: string }) => {
  expect(result.ok, result.text).toBe(true)
  return result.text
}
