// corral as its users run it: a `ShellRegistry` layer (with the watcher and
// the journal unless told otherwise) and, for output reads, the `ShellTools`
// handlers on top of it. Each open registry has its own runtime, so releasing
// that runtime is exactly releasing the registry layer.
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { sleep } from "./proc.mjs"

export const OWNER = "bench"

let modules
/** Loads corral's registry and tools (once). */
export const loadRegistry = async () =>
  (modules ??= (async () => {
    const [Duration, Effect, Layer, ManagedRuntime, Scope, Stream, core, PermissionGate, ShellTools] = await Promise.all([
      import("effect/Duration"),
      import("effect/Effect"),
      import("effect/Layer"),
      import("effect/ManagedRuntime"),
      import("effect/Scope"),
      import("effect/Stream"),
      import("@corral/core"),
      import("@corral/tools/PermissionGate"),
      import("@corral/tools/ShellTools")
    ])
    return { Duration, Effect, Layer, ManagedRuntime, Scope, Stream, ...core, ...PermissionGate, ShellTools }
  })())

const DURATIONS = new Set(["grace", "killTimeout", "killInterval", "lifetime", "retention"])

/** Limits given in plain numbers (durations in ms), so scenarios need not import Duration. */
const limitsOf = (m, limits) =>
  Object.fromEntries(Object.entries(limits).map(([key, v]) => [key, DURATIONS.has(key) ? m.Duration.millis(v) : v]))

const layerOf = (m, { crashSafety, stateDir, limits = {}, tools }) => {
  const base = m.Layer.merge(m.Limits.layerWith(limitsOf(m, limits)), m.ProcessTable.layer)
  // the default containment (auto: cgroup v2 where it works, else procScan), as `ShellRegistry.layerConfig` has it
  const contained = m.Containment.layer().pipe(m.Layer.provideMerge(base))
  const registry = m.ShellRegistry.layer({ name: "bench", crashSafety, stateDir }).pipe(m.Layer.provideMerge(contained))
  // the tools' handlers are built per caller on top of this runtime (see toolCaller)
  return tools ? m.Layer.merge(registry, m.PermissionGate.layer) : registry
}

/**
 * Builds a registry. With crash safety its journal goes to a temporary state
 * directory, removed again by `close`. `close` releases the layer (stopping
 * every shell still running) and may be called more than once.
 */
export const openRegistry = async ({ crashSafety = true, limits, tools = false } = {}) => {
  const m = await loadRegistry()
  const stateDir = crashSafety ? fs.mkdtempSync(path.join(os.tmpdir(), "corral-bench-state-")) : undefined
  const runtime = m.ManagedRuntime.make(layerOf(m, { crashSafety, stateDir, limits, tools }))
  const run = (effect) => runtime.runPromise(effect)
  const registry = await run(m.ShellRegistry)
  let releasing
  let closing
  // the layer's release alone: what a bench measures of a registry's end (the temporary directory is the bench's)
  const release = () => (releasing ??= runtime.dispose())
  const close = () =>
    (closing ??= release().finally(() => {
      if (stateDir !== undefined) fs.rmSync(stateDir, { recursive: true, force: true })
    }))
  return { m, run, runtime, registry, release, close }
}

/**
 * The registry as a bench peer (see peers.mjs): `start` is `registry.start`,
 * `stop` is `registry.kill`. With `stopManyBy: "release"`, stopping many is
 * releasing the registry layer, whose shutdown stops every shell at once.
 */
export const registryPeer = (open, { stopManyBy = "kill" } = {}) => {
  const { m, run, registry } = open
  const kill = (handle) => registry.kill(handle.id, { owner: OWNER })
  return {
    start: async ({ argv, env }) => {
      const info = await run(registry.start({ command: argv, env }, { owner: OWNER }))
      return { pid: info.pid, groups: [info.pid], id: info.id }
    },
    stop: (handle) => run(kill(handle)),
    stopMany: stopManyBy === "release"
      ? () => open.release()
      : (handles) => run(m.Effect.forEach(handles, kill, { concurrency: "unbounded", discard: true })),
    dispose: async () => {}
  }
}

/**
 * Starts `command` in the registry and resolves with the bytes its output
 * buffer took in (kept or dropped), once the shell has ended and its last
 * bytes are in. The count comes from a read by a reader that never read
 * before: it starts at 0, so what it gets plus what it missed is everything.
 */
export const drainThroughRegistry = (open) => {
  const { m, run, registry } = open
  const { Effect, Stream } = m
  let readers = 0
  const written = (id) =>
    Effect.map(registry.output(id, { mode: "new", reader: `bench-count-${++readers}` }), (r) => r.dropped + Buffer.byteLength(r.text))
  return async (command, expected) => {
    const id = await run(Effect.scoped(Effect.gen(function*() {
      // subscribed before the start, so the shell's end cannot be missed
      const events = yield* registry.subscribe
      const info = yield* registry.start({ command }, { owner: OWNER })
      yield* Stream.runHead(Stream.filter(events, (e) => (e._tag === "Exited" || e._tag === "Killed") && e.info.id === info.id))
      return info.id
    })))
    // the leader's exit can come before its last bytes are read
    for (;;) {
      const bytes = await run(written(id))
      if (bytes >= expected) return bytes
      await sleep(1)
    }
  }
}

/**
 * `bash_output` called through the toolkit, as a model host calls it. Each
 * caller gets handlers of its own owner, hence its own "new output" cursor:
 * a fresh caller's default read returns the whole buffer.
 */
export const toolCaller = async (open, owner, tool = "bash_output") => {
  const { m, runtime } = open
  const { Effect, Layer, ShellTools } = m
  // built in a scope that stays open with the runtime: the handlers subscribe to the registry's events
  const handlers = await runtime.runPromise(Effect.flatMap(m.Scope.make(), (scope) => Layer.buildWithScope(ShellTools.layer({ owner }), scope)))
  return (params) =>
    Effect.provide(
      Effect.flatMap(ShellTools.toolkit, (built) => built.handle(tool, params)),
      handlers
    )
}
