// What a registry of background shells costs: starting one, stopping many,
// swallowing a flood of output, and holding idle shells.
import { spawn } from "node:child_process"
import { once } from "node:events"
import { measureStop, newMarker, SETTLE_MS } from "../lib/measure.mjs"
import { loadCorral, loadEffectCommand, loadExeca, peers, settlesWithin, STOP_PEERS } from "../lib/peers.mjs"
import { awaitMembers, killLeftovers, liveMembers, sleep } from "../lib/proc.mjs"

const IDLE_SHELL = { argv: ["sh", "-c", "sleep 1000"], processes: 1 }
const TEARDOWN_GRACE_MS = 1000

/** Starts one handle per env, stops them with the peer's own stop, and reports whether that left anything. */
const withShells = async (peer, count, use) => {
  const marker = newMarker()
  const target = { marker, groups: [] }
  const handles = []
  try {
    const began = performance.now()
    for (let i = 0; i < count; i++) {
      handles.push(await peer.start({ argv: IDLE_SHELL.argv, env: { BENCH_MARKER: `${marker}-${i}` }, grace: TEARDOWN_GRACE_MS }))
    }
    const startMs = performance.now() - began
    target.groups = handles.flatMap((h) => h.groups)
    await awaitMembers(target, count)
    const sample = await use({ handles, startMs })
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
 * Every registry batch loads corral first, whichever implementation it
 * measures: a fork's cost grows with the forking process, so a raw spawn from
 * a bare Node would look cheaper than the same spawn from a supervisor.
 */
const asSupervisor = (run) => async (batch) => {
  await loadCorral()
  return run(batch)
}

/** ms from the start call to a handle with an id: `ProcessGroup.spawn` against a raw spawn awaiting `spawn`. */
const startBackground = {
  id: "start.background",
  suite: "registry",
  unit: "ms",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound", "effect-command", "execa"],
  runs: { quick: 20, full: 50 },
  workload: "`sh -c 'sleep 1000'`, time until the start call returns",
  run: asSupervisor(async ({ impl, runs }) => {
    const peer = peers[impl]
    const samples = []
    for (let i = -2; i < runs; i++) {
      const sample = await withShells(peer, 1, async ({ startMs }) => ({ value: startMs }))
      if (i >= 0) samples.push(sample)
    }
    return { samples }
  })
}

/** ms to stop 200 idle shells at once. */
const stopAll200 = {
  id: "stopall.200",
  suite: "registry",
  unit: "ms",
  better: "lower",
  pid1: "reaping",
  grace: 3000,
  impls: STOP_PEERS,
  runs: { quick: 3, full: 5 },
  quickSkip: { "tree-kill": "full run only: it spawns one `ps` per process and blocks its event loop for seconds" },
  workload: "200 `sleep 1000` groups, stopped together",
  run: asSupervisor(async ({ impl, runs }) => {
    const peer = peers[impl]
    const workload = { argv: ["sleep", "1000"], processes: 1 }
    await measureStop(peer, { workload, grace: 3000, count: 10 })
    const samples = []
    for (let i = 0; i < runs; i++) {
      const sample = await measureStop(peer, { workload, grace: 3000, count: 200 })
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

/** Each way of draining a command's stdout completely; resolves with the bytes seen. */
const drains = {
  corral: async (command, expected) => {
    const { Effect, ProcessGroup, Scope, Exit, runtime } = await loadCorral()
    const scope = Effect.runSync(Scope.make())
    try {
      const group = await runtime.runPromise(Scope.extend(ProcessGroup.spawn({ command }), scope))
      await runtime.runPromise(group.awaitExit)
      // the leader's exit can come before its last bytes are read
      for (;;) {
        const { written } = await runtime.runPromise(group.output.stats)
        if (written >= expected) return written
        await sleep(1)
      }
    } finally {
      await runtime.runPromise(Scope.close(scope, Exit.void))
    }
  },
  "lower-bound": async (command) => {
    const child = spawn("/bin/sh", ["-c", command], { stdio: ["ignore", "pipe", "pipe"] })
    let bytes = 0
    child.stdout.on("data", (b) => (bytes += b.length))
    child.stderr.resume()
    await once(child, "close")
    return bytes
  },
  "effect-command": async (command) => {
    const { Command, Effect, Stream, runtime } = await loadEffectCommand()
    const drain = Effect.gen(function*() {
      const started = yield* Command.start(Command.make("/bin/sh", "-c", command))
      const [bytes] = yield* Effect.all([
        Stream.runFold(started.stdout, 0, (n, chunk) => n + chunk.length),
        Stream.runDrain(started.stderr)
      ], { concurrency: 2 })
      yield* started.exitCode
      return bytes
    })
    return runtime.runPromise(Effect.scoped(drain))
  },
  execa: async (command) => {
    const { execa } = await loadExeca()
    const subprocess = execa("/bin/sh", ["-c", command], { buffer: false, stdin: "ignore" })
    let bytes = 0
    subprocess.stdout.on("data", (b) => (bytes += b.length))
    subprocess.stderr.resume()
    await subprocess
    return bytes
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
    const drain = drains[impl]
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
  })
})

/** Supervisor memory per idle shell: RSS and heap growth over 100 shells (25 in --quick), after GC. */
const idleShell = {
  id: "mem.idle-shell",
  suite: "registry",
  unit: "KiB/shell",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound", "effect-command", "execa"],
  runs: { quick: 3, full: 5 },
  extras: { heapKiB: "median" },
  workload: "100 idle `sh -c 'sleep 1000'` (25 with --quick) held at once; growth of the supervisor's RSS after GC, per shell",
  run: asSupervisor(async ({ impl, runs, quick }) => {
    const peer = peers[impl]
    const count = quick ? 25 : 100
    const samples = []
    for (let i = -1; i < runs; i++) {
      gc()
      const rss = process.memoryUsage.rss()
      const heap = process.memoryUsage().heapUsed
      const sample = await withShells(peer, count, async () => {
        gc()
        return {
          value: (process.memoryUsage.rss() - rss) / 1024 / count,
          heapKiB: (process.memoryUsage().heapUsed - heap) / 1024 / count
        }
      })
      if (i >= 0) samples.push(sample)
    }
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
