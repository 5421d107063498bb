// How each implementation starts a workload and stops it, written the way its
// own users would. Every peer exposes the same shape:
//   start({ argv, env, grace }) -> handle with `pid` and `groups` (group ids to watch)
//   stop(handle)                -> resolves when the implementation says it is done
//   stopMany(handles)           -> the same for many handles at once
//   dispose(handle)             -> releases what the handle holds (untimed)
import { spawn } from "node:child_process"
import { once } from "node:events"
import { signal, sleep } from "./proc.mjs"

/** Resolves true if `promise` settles within `ms`, false otherwise. */
export const settlesWithin = (promise, ms) => {
  let timer
  const expired = new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, ms), false)))
  return Promise.race([promise.then(() => true, () => true), expired]).finally(() => clearTimeout(timer))
}

const exited = (child) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : once(child, "exit").then(() => undefined)

/** A plain `child_process.spawn` with both pipes drained, as every peer below gets. */
const rawStart = async ({ argv, env, grace }, { detached }) => {
  const child = spawn(argv[0], argv.slice(1), { detached, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } })
  child.stdout.resume()
  child.stderr.resume()
  await once(child, "spawn")
  return { pid: child.pid, groups: detached ? [child.pid] : [], child, grace }
}

const stopEach = (peer) => (handles) => Promise.all(handles.map((h) => peer.stop(h))).then(() => undefined)

/**
 * The minimal stop: SIGTERM the group and await the leader's `exit`, nothing
 * more. When the leader ignores SIGTERM it sends one group SIGKILL at the end
 * of the grace, the least any stop must do to return at all.
 */
const lowerBound = {
  start: (spec) => rawStart(spec, { detached: true }),
  stop: async ({ child, pid, grace }) => {
    const done = exited(child)
    signal(-pid, "SIGTERM")
    if (await settlesWithin(done, grace)) return
    signal(-pid, "SIGKILL")
    await done
  }
}

/**
 * The approach of the opencode PR (seeds/opencode-pr-kill-whole-group.txt):
 * SIGTERM the group, poll `kill(-pgid, 0)` until ESRCH for up to the grace,
 * then SIGKILL the group every 10 ms until ESRCH, for at most 1 s.
 */
const opencodePr = {
  start: (spec) => rawStart(spec, { detached: true }),
  stop: async ({ pid, grace }) => {
    signal(-pid, "SIGTERM")
    const graceEnd = performance.now() + grace
    while (signal(-pid, 0) && performance.now() < graceEnd) await sleep(10)
    const killEnd = performance.now() + 1000
    while (signal(-pid, "SIGKILL") && performance.now() < killEnd) await sleep(10)
  }
}

/**
 * tree-kill as its README shows it: the child stays in the caller's group and
 * `treeKill(pid)` walks the ppid tree with `ps`. Escalates with
 * `treeKill(pid, "SIGKILL")` when the leader outlives the grace.
 */
const treeKillPeer = {
  start: (spec) => rawStart(spec, { detached: false }),
  stop: async ({ child, pid, grace }) => {
    const { default: treeKill } = await import("tree-kill")
    const kill = (name) => new Promise((resolve) => treeKill(pid, name, () => resolve()))
    const done = exited(child)
    const began = performance.now()
    await kill("SIGTERM")
    if (await settlesWithin(done, grace - (performance.now() - began))) return
    await kill("SIGKILL")
    await done
  }
}

export const loadExeca = () => import("execa")

/**
 * execa 9 (the last line supporting Node 20) with `detached: true`, so the
 * command leads its own group, and the group stop execa 10's
 * `killDescendants` + `forceKillAfterDelay` perform: SIGTERM to the group,
 * then SIGKILL to it if the subprocess has not completed within the grace.
 */
const execaPeer = {
  start: async ({ argv, env, grace }) => {
    const { execa } = await loadExeca()
    const subprocess = execa(argv[0], argv.slice(1), { env, stdin: "ignore", detached: true, reject: false })
    await once(subprocess, "spawn")
    return { pid: subprocess.pid, groups: [subprocess.pid], subprocess, grace }
  },
  stop: async ({ subprocess, grace }) => {
    signal(-subprocess.pid, "SIGTERM")
    if (!(await settlesWithin(subprocess, grace))) signal(-subprocess.pid, "SIGKILL")
    await subprocess
  }
}

const loadEffect = async () => {
  const [Effect, Exit, Layer, ManagedRuntime, Scope] = await Promise.all([
    import("effect/Effect"),
    import("effect/Exit"),
    import("effect/Layer"),
    import("effect/ManagedRuntime"),
    import("effect/Scope")
  ])
  return { Effect, Exit, Layer, ManagedRuntime, Scope }
}

const memo = (load) => {
  let loaded
  return () => (loaded ??= load())
}

/** `@effect/platform` v3 `Command.start` under `NodeContext.layer`; the stop is closing its scope. */
export const loadEffectCommand = memo(async () => {
  const fx = await loadEffect()
  const [Command, NodeContext, Stream] = await Promise.all([
    import("@effect/platform/Command"),
    import("@effect/platform-node/NodeContext"),
    import("effect/Stream")
  ])
  return { ...fx, Command, Stream, runtime: fx.ManagedRuntime.make(NodeContext.layer) }
})

const effectCommand = {
  start: async ({ argv, env }) => {
    const { Command, Effect, Scope, runtime } = await loadEffectCommand()
    const scope = Effect.runSync(Scope.make())
    const command = Command.make(argv[0], ...argv.slice(1)).pipe(Command.env(env))
    const started = await runtime.runPromise(Scope.extend(Command.start(command), scope))
    return { pid: started.pid, groups: [started.pid], scope, started }
  },
  stop: async ({ scope }) => {
    const { Exit, Scope, runtime } = await loadEffectCommand()
    await runtime.runPromise(Scope.close(scope, Exit.void))
  }
}

/**
 * corral: `ProcessGroup.spawn` in a scope, `group.stop()`, `ProcessGroup.stopAll`
 * for many, under `Containment.layer(backend)`: "auto" (cgroup v2 where it
 * works, as root here; else procScan), "cgroup" or "procScan".
 */
const corralRuntimes = new Map()
export const loadCorral = (backend = "auto") => {
  if (!corralRuntimes.has(backend)) {
    corralRuntimes.set(backend, (async () => {
      const fx = await loadEffect()
      const { Containment, Limits, ProcessGroup, ProcessTable, OutputBuffer } = await import("@corral/core")
      const layer = Containment.layer(backend).pipe(fx.Layer.provideMerge(fx.Layer.merge(ProcessTable.layer, Limits.layer)))
      return { ...fx, Containment, ProcessGroup, OutputBuffer, runtime: fx.ManagedRuntime.make(layer) }
    })())
  }
  return corralRuntimes.get(backend)
}

/**
 * Releases every corral runtime loaded so far: the containment's layer then
 * removes its parent cgroup, which a batch that exits without it leaves
 * behind (empty, until a later supervisor reaps it). At most 2 s: a scope a
 * hung stop holds does not hold up the batch's exit.
 */
export const disposeCorral = () =>
  settlesWithin(Promise.all([...corralRuntimes.values()].map(async (loaded) => (await loaded).runtime.dispose())), 2000)

const corralPeer = (backend) => ({
  start: async ({ argv, env, grace }) => {
    const { Effect, ProcessGroup, Scope, runtime } = await loadCorral(backend)
    const scope = Effect.runSync(Scope.make())
    const group = await runtime.runPromise(Scope.extend(ProcessGroup.spawn({ command: argv, env }), scope))
    return { pid: group.pid, groups: [group.pid], group, scope, grace, containment: group.containment }
  },
  stop: async ({ group, grace }) => {
    const { runtime } = await loadCorral(backend)
    await runtime.runPromise(group.stop({ grace }))
  },
  stopMany: async (handles) => {
    const { ProcessGroup, runtime } = await loadCorral(backend)
    await runtime.runPromise(ProcessGroup.stopAll(handles.map((h) => h.group), { grace: handles[0]?.grace }))
  },
  dispose: async ({ scope }) => {
    const { Exit, Scope, runtime } = await loadCorral(backend)
    await runtime.runPromise(Scope.close(scope, Exit.void))
  }
})

const withDefaults = (peer) => ({ dispose: async () => {}, ...peer, stopMany: peer.stopMany ?? stopEach(peer) })

/** Every implementation, corral first; the order is the column order of every table. */
export const peers = {
  corral: withDefaults(corralPeer("auto")),
  "lower-bound": withDefaults(lowerBound),
  "opencode-pr": withDefaults(opencodePr),
  "effect-command": withDefaults(effectCommand),
  execa: withDefaults(execaPeer),
  "tree-kill": withDefaults(treeKillPeer)
}

export const STOP_PEERS = Object.keys(peers)

/** Backends a scenario may name for corral besides the default; its id then ends in `@<backend>`. */
export const CORRAL_BACKENDS = ["pidns", "procScan"]

const backendPeers = new Map()
/** corral under one containment backend ("auto" is the `corral` peer). */
export const corralWith = (backend) => {
  if (backend === "auto") return peers.corral
  if (!backendPeers.has(backend)) backendPeers.set(backend, withDefaults(corralPeer(backend)))
  return backendPeers.get(backend)
}
