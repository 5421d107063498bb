// What a registry of background shells costs: starting one, stopping many,
// swallowing a flood of output, and holding idle shells. corral's side goes
// through `ShellRegistry`, as its users run it: crash safety on (a watcher
// process and a journal, here in a temporary state directory), default limits
// unless a scenario needs more shells than the default cap of 16.
import { spawn } from "node:child_process"
import { once } from "node:events"
import { measureStop, newMarker, SETTLE_MS } from "../lib/measure.mjs"
import { loadEffectCommand, loadExeca, peers, settlesWithin, STOP_PEERS } from "../lib/peers.mjs"
import { runProbe } from "../lib/namespace.mjs"
import { awaitMembers, killLeftovers, liveMembers, sleep } from "../lib/proc.mjs"
import { drainThroughRegistry, loadRegistry, openRegistry, registryPeer } from "../lib/registry.mjs"

const IDLE_SHELL = { argv: ["sh", "-c", "sleep 1000"], processes: 1 }
const TEARDOWN_GRACE_MS = 1000

/**
 * Starts `count` shells, hands them to `use`, stops them with the peer's own
 * stop and reports whether that left anything. With `warmUp`, that many
 * shells are started first (running `warmUpArgv`, one process each) and
 * kept running alongside; `beforeMeasured` runs between them and the
 * measured ones, with their handles, and `use` gets what it returned.
 */
const withShells = async (peer, count, use, { warmUp = 0, warmUpArgv = IDLE_SHELL.argv, beforeMeasured } = {}) => {
  const marker = newMarker()
  const target = { marker, groups: [] }
  const handles = []
  const startOne = async (argv = IDLE_SHELL.argv) => {
    const handle = await peer.start({ argv, env: { BENCH_MARKER: `${marker}-${handles.length}` }, grace: TEARDOWN_GRACE_MS })
    handles.push(handle)
    target.groups.push(...handle.groups)
  }
  try {
    for (let i = 0; i < warmUp; i++) await startOne(warmUpArgv)
    const before = await beforeMeasured?.(handles)
    const began = performance.now()
    for (let i = 0; i < count; i++) await startOne()
    const startMs = performance.now() - began
    await awaitMembers(target, warmUp + count)
    const sample = await use({ handles, startMs, before })
    // the peer's own teardown, judged like a stop: what is still alive once it had time to act
    await settlesWithin(peer.stopMany(handles), TEARDOWN_GRACE_MS + 2000)
    await sleep(SETTLE_MS)
    const aliveLater = liveMembers(target).length
    return { ...sample, clean: aliveLater === 0, aliveLater }
  } finally {
    await killLeftovers(target)
    await Promise.all(handles.map((h) => peer.dispose(h)))
  }
}

const gc = () => globalThis.gc?.()

/**
 * A full GC, then a pause for V8 to hand freed pages back and for the
 * finalizers of the last teardown to run, then another GC: RSS read after
 * this moves by far less than after a bare `gc()`.
 */
const quiesce = async () => {
  gc()
  await sleep(50)
  gc()
}

/**
 * Every registry batch loads corral's registry and tools first, whichever
 * implementation it measures: a fork's cost grows with the forking process,
 * so a raw spawn from a bare Node would look cheaper than the same spawn from
 * a supervisor.
 */
const asSupervisor = (run) => async (batch) => {
  await loadRegistry()
  return run(batch)
}

/**
 * ms from the start call to a handle with an id: `ShellRegistry.start`
 * against a raw spawn awaiting `spawn`. corral's batch holds two registries,
 * one with crash safety and one without, and alternates between them, so the
 * watcher's and the journal's share of a start is measured under the same noise.
 * It also times a raw spawn between them, from the same process: a fork
 * costs more the more memory the forking process maps (3.7 ms from a bare
 * Node here, 5.2 ms with corral loaded, 5.5-7.8 ms from a process that
 * holds two registries), so the lower bound's own batch, which holds none,
 * is not what corral adds to a spawn.
 */
const startBackground = {
  id: "start.background",
  suite: "registry",
  unit: "ms",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound", "effect-command", "execa"],
  runs: { quick: 20, full: 50 },
  extras: { noCrashSafetyMs: "range", rawSpawnMs: "range" },
  workload: "`sh -c 'sleep 1000'`, time until the start call returns; corral's batch also times a raw spawn between its starts, from its own process",
  run: asSupervisor(async ({ impl, runs }) => {
    const startOnce = (peer) => withShells(peer, 1, async ({ startMs }) => ({ value: startMs }))
    if (impl !== "corral") return { samples: await repeat(runs, 2, () => startOnce(peers[impl])) }
    const crashSafe = await openRegistry({ crashSafety: true })
    const plain = await openRegistry({ crashSafety: false })
    try {
      const [safePeer, plainPeer] = [registryPeer(crashSafe), registryPeer(plain)]
      const samples = await repeat(runs, 2, async () => {
        const safe = await startOnce(safePeer)
        const bare = await startOnce(plainPeer)
        const raw = await startOnce(peers["lower-bound"])
        return {
          ...safe,
          clean: safe.clean && bare.clean && raw.clean,
          aliveLater: safe.aliveLater + bare.aliveLater + raw.aliveLater,
          noCrashSafetyMs: bare.value,
          rawSpawnMs: raw.value
        }
      })
      return { samples }
    } finally {
      await Promise.all([crashSafe.close(), plain.close()])
    }
  })
}

/** `runs` samples of `measure`, after `warmUp` unmeasured ones. */
const repeat = async (runs, warmUp, measure) => {
  const samples = []
  for (let i = -warmUp; i < runs; i++) {
    const sample = await measure()
    if (i >= 0) samples.push(sample)
  }
  return samples
}

/**
 * ms to stop 200 idle shells at once. corral: 200 shells started through a
 * registry (its cap raised to 200), then the registry layer released: its
 * shutdown stops them all with one shared scan per tick. The clock runs from
 * the release call until the release is done, watcher and journal included.
 */
const STOPALL_COUNT = 200
const STOPALL_GRACE_MS = 3000

const stopAllWith = async (impl, count) => {
  const workload = { argv: ["sleep", "1000"], processes: 1, sleeps: 1 }
  if (impl !== "corral") return measureStop(peers[impl], { workload, grace: STOPALL_GRACE_MS, count })
  const open = await openRegistry({ crashSafety: true, limits: { maxShells: count, grace: STOPALL_GRACE_MS } })
  try {
    return await measureStop(registryPeer(open, { stopManyBy: "release" }), { workload, grace: STOPALL_GRACE_MS, count })
  } finally {
    await open.close()
  }
}

const stopAll200 = {
  id: "stopall.200",
  suite: "registry",
  unit: "ms",
  better: "lower",
  pid1: "reaping",
  grace: STOPALL_GRACE_MS,
  impls: STOP_PEERS,
  runs: { quick: 3, full: 5 },
  quickSkip: { "tree-kill": "full run only: it spawns one `ps` per process and blocks its event loop for seconds" },
  workload: "200 `sleep 1000` groups, stopped together (corral: started through one `ShellRegistry`, stopped by releasing its layer)",
  run: asSupervisor(async ({ impl, runs }) => {
    await stopAllWith(impl, 10)
    const samples = []
    for (let i = 0; i < runs; i++) {
      const sample = await stopAllWith(impl, STOPALL_COUNT)
      samples.push(sample)
      if (sample.timedOut) break
    }
    return { samples }
  })
}

const GIB = 1024 ** 3

/** Tracks the peak RSS while `fn` runs; returns its result and the growth over the starting RSS. */
const withPeakRss = async (fn) => {
  gc()
  const base = process.memoryUsage.rss()
  let peak = base
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5)
  try {
    const result = await fn()
    peak = Math.max(peak, process.memoryUsage.rss())
    return { result, rssGrowthKiB: (peak - base) / 1024 }
  } finally {
    clearInterval(sampler)
  }
}

/**
 * Each way of draining a command's stdout completely, opened once per batch:
 * `drain(command, expected)` resolves with the bytes seen.
 */
const drains = {
  corral: async () => {
    const open = await openRegistry({ crashSafety: true })
    return { drain: drainThroughRegistry(open), close: open.close }
  },
  "lower-bound": async () => ({
    drain: async (command) => {
      const child = spawn("/bin/sh", ["-c", command], { stdio: ["ignore", "pipe", "pipe"] })
      let bytes = 0
      child.stdout.on("data", (b) => (bytes += b.length))
      child.stderr.resume()
      await once(child, "close")
      return bytes
    }
  }),
  "effect-command": async () => {
    const { Command, Effect, Stream, runtime } = await loadEffectCommand()
    return {
      drain: (command) =>
        runtime.runPromise(Effect.scoped(Effect.gen(function*() {
          const started = yield* Command.start(Command.make("/bin/sh", "-c", command))
          const [bytes] = yield* Effect.all([
            Stream.runFold(started.stdout, 0, (n, chunk) => n + chunk.length),
            Stream.runDrain(started.stderr)
          ], { concurrency: 2 })
          yield* started.exitCode
          return bytes
        })))
    }
  },
  execa: async () => {
    const { execa } = await loadExeca()
    return {
      drain: async (command) => {
        const subprocess = execa("/bin/sh", ["-c", command], { buffer: false, stdin: "ignore" })
        let bytes = 0
        subprocess.stdout.on("data", (b) => (bytes += b.length))
        subprocess.stderr.resume()
        await subprocess
        return bytes
      }
    }
  }
}

const WARM_UP_BYTES = 128 * 1024 ** 2

const FULL_RUN_ONLY = "full run only"

const ingestScenario = ({ id, command, workload }) => ({
  id,
  suite: "registry",
  unit: "MiB/s",
  better: "higher",
  pid1: "reaping",
  impls: Object.keys(drains),
  // the target compares corral with the raw drain; the other peers are for the full run
  quickSkip: { "effect-command": FULL_RUN_ONLY, execa: FULL_RUN_ONLY },
  runs: { quick: 3, full: 5 },
  extras: { rssGrowthKiB: "max" },
  workload,
  run: asSupervisor(async ({ impl, runs }) => {
    const { drain, close } = await drains[impl]()
    try {
      // an unmeasured 128 MiB first pays for loading, JIT and the heap's first growth
      await drain(command(WARM_UP_BYTES), WARM_UP_BYTES)
      const samples = []
      for (let i = 0; i < runs; i++) {
        const began = performance.now()
        const { result: bytes, rssGrowthKiB } = await withPeakRss(() => drain(command(GIB), GIB))
        const seconds = (performance.now() - began) / 1000
        if (bytes < GIB) throw new Error(`${impl} saw ${bytes} of ${GIB} bytes`)
        samples.push({ value: bytes / 1024 ** 2 / seconds, clean: true, rssGrowthKiB })
      }
      return { samples }
    } finally {
      await close?.()
    }
  })
})

/** As many idle shells as a registry runs by default, its cap. */
const IDLE_COUNT = 16

const memory = () => ({ rss: process.memoryUsage.rss(), heap: process.memoryUsage().heapUsed })

/**
 * One sample of memory per idle shell, in a process that has stopped nothing
 * yet: every stop leaves garbage (corral's reads of /proc allocate a buffer
 * per file) whose pages the allocator hands back at unpredictable times, so
 * after a stop RSS can shrink while shells are added. As many shells as are
 * measured are started and kept first: V8 compiles a start path's code and
 * allocates its feedback over its first dozen calls or so, a cost of the
 * process and not of a shell (one warm-up shell left about half of corral's
 * heap growth and a third of the lower bound's to the JIT). corral's
 * registry also starts its one pattern worker, a thread of its own, at its
 * first shell: the warm-up shells print a line, and a filtered read of one
 * waits for that worker, so that its megabytes do not land among the
 * measured shells' when its start is slow.
 */
const WARM_UP_SHELL = ["sh", "-c", "echo warm; exec sleep 1000"]

const idleSample = async (impl) => {
  // the cap makes room for the warm-up shells beside the measured ones
  const open = impl === "corral" ? await openRegistry({ crashSafety: true, limits: { maxShells: 2 * IDLE_COUNT } }) : undefined
  try {
    const peer = open === undefined ? peers[impl] : registryPeer(open, { stopManyBy: "release" })
    return await withShells(peer, IDLE_COUNT, async ({ before }) => {
      await quiesce()
      const after = memory()
      return { value: (after.rss - before.rss) / 1024 / IDLE_COUNT, heapKiB: (after.heap - before.heap) / 1024 / IDLE_COUNT }
    }, {
      warmUp: IDLE_COUNT,
      warmUpArgv: WARM_UP_SHELL,
      beforeMeasured: async (handles) => {
        if (open === undefined) return quiesce().then(memory)
        const read = open.registry.output(handles[0].id, { mode: "all", waitFor: "warm", filter: "warm" })
        const { text } = await open.run(read)
        if (text !== "warm\n") throw new Error(`the warm-up shell's filtered output was ${JSON.stringify(text)}, not "warm\\n"`)
        await quiesce()
        return memory()
      }
    })
  } finally {
    await open?.close()
  }
}

/**
 * glibc gives each thread that allocates an arena of its own, and what V8's
 * compiler and GC threads free there during the measured starts stays
 * resident: 0 to 48 KiB per shell from one run to the next, none of it held
 * by a shell (with `--single-threaded`, 0 to 8). One arena for every thread
 * reuses that memory instead; V8 keeps its threads.
 */
const ONE_MALLOC_ARENA = { MALLOC_ARENA_MAX: "1" }

/**
 * Supervisor memory per idle shell: RSS and heap growth over 16 shells (the
 * registry's default cap; corral holds them in one `ShellRegistry`, beside
 * 16 warm-up shells), after GC. Each sample runs in a fresh worker process
 * of its own (see idleSample).
 */
const idleShell = {
  id: "mem.idle-shell",
  suite: "registry",
  unit: "KiB/shell",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound", "effect-command", "execa"],
  runs: { quick: 3, full: 7 },
  extras: { heapKiB: "median" },
  workload: `${IDLE_COUNT} idle \`sh -c 'sleep 1000'\` held at once (corral: by one \`ShellRegistry\`); growth of the supervisor's RSS after GC, per shell, each run in a fresh process`,
  run: asSupervisor(async ({ id, impl, runs, quick, probe }) => {
    if (probe) return { samples: [await idleSample(impl)] }
    const samples = []
    for (let i = 0; i < runs; i++) samples.push(...(await runProbe({ id, impl, runs: 1, quick, probe: true }, { env: ONE_MALLOC_ARENA })).samples)
    return { samples }
  })
}

export const scenarios = [
  startBackground,
  stopAll200,
  ingestScenario({
    id: "ingest.1gib",
    command: (bytes) => `head -c ${bytes} /dev/zero`,
    workload: "`head -c 1G /dev/zero`"
  }),
  ingestScenario({
    id: "ingest.1gib.yes",
    command: (bytes) => `yes | head -c ${bytes}`,
    workload: "`yes | head -c 1G`"
  }),
  idleShell
]
