// What a single stop cannot go below under each containment backend: the
// processes corral runs for a `sleep 1000` (the cell's own wrapper, namespace
// and init), stopped by the least a stop can do, one SIGTERM to the group and
// the leader's exit event. Measured interleaved with corral's own stop of the
// same command under that backend, execa's stop and the bare `sleep`'s, in
// one process, so every figure has the same noise.
//
//   npm run bench:floors [-- --runs N]
//
// It measures `stopall.200`'s floor the same way: 200 of the default
// backend's cells around a `sleep` each, stopped by one group SIGTERM each,
// their leaders' exits and the cells' removal, interleaved with 200 bare
// `sleep`s (the lower bound) and a corral registry of 200 shells released.
//
// Runs in a PID namespace of its own (scripts/in-pidns.mjs) and writes
// docs/bench/floors.md. A backend this machine cannot use is named with the
// reason and left out.
import { spawn } from "node:child_process"
import { once } from "node:events"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import * as Cause from "effect/Cause"
import { disposeCorral, loadCorral, loadExeca } from "./lib/peers.mjs"
import { openRegistry, OWNER } from "./lib/registry.mjs"

const { values } = parseArgs({ options: { runs: { type: "string", default: "41" } } })
const RUNS = Number(values.runs)
if (!Number.isSafeInteger(RUNS) || RUNS < 5) {
  console.error(`bench:floors: --runs must be a whole number of at least 5; got "${values.runs}"`)
  process.exit(2)
}
const GRACE_MS = 3000
/** How long each `sleep` runs before its stop: long enough for every wrapper to have exec'd it. */
const SETTLE_MS = 50
const ARGV = ["sleep", "1000"]

/** How many groups the many-at-once floor stops together, as `stopall.200`. */
const MANY = 200
/** Rounds of the many-at-once floor: each spawns 600 processes. */
const MANY_RUNS = Math.max(5, Math.round(RUNS / 4))

const withGrace = async (child, pid) => {
  const exited = once(child, "exit")
  process.kill(-pid, "SIGTERM")
  const timer = setTimeout(() => process.kill(-pid, "SIGKILL"), GRACE_MS)
  await exited
  clearTimeout(timer)
}

/** A detached child with its output drained, as every implementation here runs it; resolves once it runs. */
const started = async (file, args, extraFd = false) => {
  const child = spawn(file, args, { detached: true, stdio: ["ignore", "pipe", "pipe", ...(extraFd ? ["pipe"] : [])] })
  for (const stream of child.stdio) stream?.resume?.()
  await once(child, "spawn")
  return child
}

/** The backend's own processes around `sleep`, stopped by one group SIGTERM and the leader's exit. */
const floorOf = (loaded) => {
  const startOne = cellOne(loaded)
  return async () => {
    const { child, release } = await startOne()
    return { stop: () => withGrace(child, child.pid), done: release }
  }
}

/** One of the backend's cells around a `sleep`, spawned as corral spawns it; `release` removes the cell. */
const cellOne = ({ Containment, runtime }) => {
  const containment = runtime.runSync(Containment)
  let n = 0
  return async () => {
    const cell = await runtime.runPromise(containment.cell(`floor-${process.pid}-${n++}`))
    const [file, args] = cell.wrap(ARGV[0], ARGV.slice(1))
    const child = await started(file, args, cell.reportsExit)
    // an init says `forked` once the command's process exists (see Containment's init)
    if (cell.reportsExit) await once(child.stdio[3], "data")
    return {
      child,
      release: async () => {
        const rest = cell.release()
        if (rest !== undefined) await runtime.runPromise(rest)
      }
    }
  }
}

/** corral's own stop: `ProcessGroup.spawn` in a scope of its own, `group.stop()`, the scope closed after. */
const corralOf = ({ Effect, Exit, ProcessGroup, Scope, runtime }) => async () => {
  const scope = Effect.runSync(Scope.make())
  const group = await runtime.runPromise(Scope.extend(ProcessGroup.spawn({ command: ARGV }), scope))
  return {
    stop: () => runtime.runPromise(group.stop({ grace: GRACE_MS })),
    done: () => runtime.runPromise(Scope.close(scope, Exit.void))
  }
}

const bare = async () => {
  const child = await started(ARGV[0], ARGV.slice(1))
  return { stop: () => withGrace(child, child.pid), done: async () => {} }
}

const execaStop = async () => {
  const { execa } = await loadExeca()
  const subprocess = execa(ARGV[0], ARGV.slice(1), { stdin: "ignore", detached: true, reject: false })
  await once(subprocess, "spawn")
  return {
    stop: async () => {
      process.kill(-subprocess.pid, "SIGTERM")
      await subprocess
    },
    done: async () => {}
  }
}

/**
 * Many at once: `count` of what `startOne` starts, all stopped by one group
 * SIGTERM each and their leaders' exits, then `release`d each (the floor's
 * cells removed: a stop under cgroup leaves none).
 */
const manyOf = (startOne) => async (count) => {
  const held = []
  for (let i = 0; i < count; i++) held.push(await startOne())
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  return {
    stop: async () => {
      await Promise.all(held.map(({ child }) => withGrace(child, child.pid)))
      for (const { release } of held) await release()
    },
    done: async () => {}
  }
}

const bareOne = async () => ({ child: await started(ARGV[0], ARGV.slice(1)), release: async () => {} })

/** corral's `stopall.200`: a registry of `count` shells (crash safety on), released; the clock runs for the release alone. */
const corralMany = async (count) => {
  const open = await openRegistry({ crashSafety: true, limits: { maxShells: count, grace: GRACE_MS } })
  for (let i = 0; i < count; i++) await open.run(open.registry.start({ command: ARGV }, { owner: OWNER }))
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  return { stop: () => open.release(), done: () => open.close() }
}

/** Each backend this machine can use, with corral's stop and its floor; the others, with why not. */
const unusable = []
const backendsHere = async () => {
  const usable = []
  for (const backend of ["cgroup", "pidns", "procScan"]) {
    const loaded = await loadCorral(backend)
    const built = await loaded.runtime.runPromiseExit(loaded.Containment)
    if (built._tag === "Failure") {
      unusable.push(`${backend}: not measured here: ${Cause.pretty(built.cause).split("\n")[0]}`)
      continue
    }
    usable.push([`corral (${backend})`, corralOf(loaded)], [`floor (${backend})`, floorOf(loaded)])
  }
  return usable
}

/** `runs` timed stops of each variant, interleaved, in alternating order, after three unmeasured rounds (loading and JIT warm-up are not a stop's). */
const interleaved = async (variants, runs, start) => {
  const samples = new Map(variants.map(([name]) => [name, []]))
  for (let round = -3; round < runs; round++) {
    for (const [name, variant] of round % 2 === 0 ? variants : [...variants].reverse()) {
      const held = await start(variant)
      const began = performance.now()
      await held.stop()
      const ms = performance.now() - began
      await held.done()
      if (round >= 0) samples.get(name).push(ms)
    }
  }
  return samples
}

const variants = [["bare sleep (lower-bound)", bare], ["execa", execaStop], ...(await backendsHere())]
const samples = await interleaved(variants, RUNS, async (start) => {
  const held = await start()
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  return held
})

// the default backend's, as `stopall.200` runs under it
const auto = await loadCorral("auto")
const autoBackend = auto.runtime.runSync(auto.Containment).backend
const manyVariants = [
  [`${MANY} bare sleeps (lower-bound)`, manyOf(bareOne)],
  [`floor (${autoBackend}), ${MANY} cells`, manyOf(cellOne(auto))],
  [`corral (${autoBackend}), a registry of ${MANY} released`, corralMany]
]
const manySamples = await interleaved(manyVariants, MANY_RUNS, (start) => start(MANY))

const quantile = (sorted, q) => sorted[Math.round(q * (sorted.length - 1))]

/** µs from `Effect.runFork` to its first instruction: back to back, and after SETTLE_MS idle, as a stop comes. */
const fiberEntry = async () => {
  const { Effect } = await loadCorral("procScan")
  let entered = 0
  let began = 0
  const body = Effect.sync(() => (entered = performance.now() - began))
  const entry = async (idleMs) => {
    const times = []
    for (let i = 0; i < 31; i++) {
      await new Promise((resolve) => (idleMs === 0 ? setImmediate(resolve) : setTimeout(resolve, idleMs)))
      began = performance.now()
      Effect.runFork(body)
      times.push(entered * 1000)
    }
    return quantile(times.sort((a, b) => a - b), 0.5)
  }
  await entry(0)
  return { warm: await entry(0), idle: await entry(SETTLE_MS) }
}
const entryUs = await fiberEntry()
const sortedOf = (name, from = samples) => [...from.get(name)].sort((a, b) => a - b)
const median = (name, from = samples) => quantile(sortedOf(name, from), 0.5)
const ms = (v) => `${v.toFixed(2)} ms`
const rows = variants.map(([name]) => {
  const sorted = sortedOf(name)
  const floor = name.replace("corral", "floor")
  const over = name.startsWith("corral") ? ms(median(name) - median(floor)) : ""
  return `| ${name} | ${ms(quantile(sorted, 0.5))} | ${quantile(sorted, 0.25).toFixed(2)}-${ms(quantile(sorted, 0.75))} | ${over} |`
})
const verdicts = variants.filter(([name]) => name.startsWith("floor")).map(([name]) =>
  `- ${name}: ${ms(median(name))}, ${median(name) < median("execa") ? "below" : "above"} execa's whole stop (${ms(median("execa"))}).`
)
const table = ["| Implementation | median | q1-q3 | corral over its floor |", "|---|---|---|---|", ...rows].join("\n")

const [manyBare, manyFloor, manyCorral] = manyVariants.map(([name]) => median(name, manySamples))
const times = (v) => `${(v / manyBare).toFixed(2)}x`
const manyTable = [
  "| Implementation | median | q1-q3 | over the lower bound |",
  "|---|---|---|---|",
  ...manyVariants.map(([name]) => {
    const sorted = sortedOf(name, manySamples)
    return `| ${name} | ${ms(quantile(sorted, 0.5))} | ${quantile(sorted, 0.25).toFixed(2)}-${ms(quantile(sorted, 0.75))} | ${times(quantile(sorted, 0.5))} |`
  })
].join("\n")
const manyVerdict = `- floor (${autoBackend}) of ${MANY} at once: ${ms(manyFloor)}, ${times(manyFloor)} the lower bound's ${ms(manyBare)}. ` +
  `Within 1.5x the lower bound (issue 15's target) leaves corral ${ms(1.5 * manyBare - manyFloor)} for all its own work on ${MANY} shells; it took ${ms(manyCorral - manyFloor)}.`
const doc = `# What a stop cannot go below, per containment backend

Generated by \`npm run bench:floors\` (${new Date().toISOString()}, uid ${process.getuid?.()}, ${os.cpus().length} CPUs, Node ${process.version}); ${RUNS} stops of each, interleaved in one process in one PID namespace, each ${SETTLE_MS} ms after its start.

A **floor** is the processes corral runs for \`sleep 1000\` under that backend, made by the backend's own \`Containment.cell\` (the cgroup cell and its joining wrapper; \`unshare\`, its namespace and the init; the init made a subreaper), spawned with piped output as corral spawns them, and stopped by the least a stop can do: one SIGTERM to the group, then the leader's exit event. What corral adds over its floor is its own work: entering the Effect runtime, reading the cell, the look at the exit, the report. \`execa\` and the bare \`sleep\` (the main bench's lower bound) stop a \`sleep\` with no containment.

${table}

${[...verdicts, ...unusable.map((line) => `- ${line}`)].join("\n")}

Entering a fiber (\`Effect.runFork\` to its first instruction) took ${entryUs.warm.toFixed(1)} µs back to back and ${entryUs.idle.toFixed(1)} µs ${SETTLE_MS} ms after the last (medians of 31): code and data an idle moment let go cold cost every implementation, and corral's stop runs more of them than a bare loop.

Under pidns and procScan the floor is a chain: the \`sleep\` dies, the init reaps it and exits, and, under pidns, the namespace ends and \`unshare\` exits after it. Each step is a process woken, then exiting, and the next woken by that exit; a perf trace of one such stop (sched and signal tracepoints, 2026-12-05) also showed \`unshare\` blocked about 0.1 ms at its exit in \`synchronize_rcu_expedited\` under \`free_nsproxy\`: the teardown of the mount namespace that \`--mount-proc\` made. Where that chain alone takes longer than execa's whole stop, no stop under that backend can be ahead of execa.

## Many at once (\`stopall.200\`'s floor)

${MANY_RUNS} rounds of each, interleaved. The floor is ${MANY} of the default backend's cells, each around a \`sleep\` spawned as above, stopped by one SIGTERM to each group and all the leaders' exit events, then each cell's release (under cgroup its \`rmdir\`: a stop leaves no cell behind). The lower bound is ${MANY} bare \`sleep\`s stopped the same way, as the main bench's \`stopall.200\` stops them. corral's is that scenario's: a \`ShellRegistry\` of ${MANY} shells (journal and watcher on) released, the clock running for the release alone.

${manyTable}

${manyVerdict}
`
fs.writeFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "docs", "bench", "floors.md"), doc)
console.log(`\n${table}\n\n${manyTable}\n${manyVerdict}\n\nfiber entry: ${entryUs.warm.toFixed(1)} µs back to back, ${entryUs.idle.toFixed(1)} µs after ${SETTLE_MS} ms idle\n${verdicts.join("\n")}${unusable.map((line) => `\n${line}`).join("")}\n\nwrote docs/bench/floors.md`)
await disposeCorral()
process.exit(0)
