// Runs one scenario N times on one containment backend, as PID 1 of its own
// PID namespace when the soak could make one, and checks after each iteration
// what the kernel says is left: live processes, corral's cgroups, this
// supervisor's descriptors, its memory.
import { randomInt } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { SoakFailure } from "./lib/harness.mjs"
import * as Kernel from "./lib/kernel.mjs"

const { values: args } = parseArgs({
  options: {
    scenario: { type: "string" },
    backend: { type: "string" },
    iterations: { type: "string" },
    "flood-bytes": { type: "string" },
    result: { type: "string" },
    pidns: { type: "boolean", default: false }
  }
})
// only this scenario's module: what the others import would count in this runner's memory
const { default: scenario } = await import(`./scenarios/${args.scenario}.mjs`)
const iterations = Number(args.iterations)
/** The row of the matrix: the scenario on its backend. */
const label = `${scenario.id}@${args.backend}`
const SETTLE_MS = 2000
/** How long past its timeout an iteration may take to unwind before the runner gives up on it. */
const HUNG_MS = 15_000
let hung = false

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The iteration's tokens (ctx.token): whatever carries one in its argv or environment is the iteration's, however it left. */
let tokens = new Set()

/**
 * Inside the namespace everything but this runner is a leftover; outside,
 * only what carries this runner's shell tags or one of the iteration's tokens.
 */
const leftovers = () => {
  if (args.pidns) return Kernel.liveOthers()
  const ours = `${process.pid}:`
  const marked = new Set(Kernel.liveMarked(tokens).map((p) => p.pid))
  return Kernel.liveOthers().filter((p) => marked.has(p.pid) || (Kernel.shellIdOf(p.pid) ?? "").startsWith(ours))
}

// a namespace's inode is reused once it is gone: what a dead namespace of the same number left is not this runner's
const staleCgroups = new Set(args.pidns ? Kernel.corralCgroups() : [])

/**
 * corral's cgroups left under this PID namespace's name once every
 * containment of the iteration has been released. Outside a namespace of its
 * own the runner shares the name with every corral on the machine: not counted.
 */
const cgroupLeftovers = () => (args.pidns ? Kernel.corralCgroups().filter((dir) => !staleCgroups.has(dir)) : [])

/** A process may still be on its way out (a watcher after its last stop): give it a moment. */
const settle = async (probe, done, ms) => {
  const deadline = performance.now() + ms
  let value = probe()
  while (!done(value) && performance.now() < deadline) {
    await sleep(10)
    value = probe()
  }
  return value
}

const signal = (pid, name) => {
  try {
    process.kill(pid, name)
  } catch {
    // already gone
  }
}

/** Freezes, then kills, round after round: a pid hopper forks a successor between a scan and a kill. */
const clear = async () => {
  const deadline = performance.now() + SETTLE_MS
  for (;;) {
    const live = leftovers()
    if (live.length === 0 || performance.now() > deadline) return live
    for (const p of live) signal(p.pid, "SIGSTOP")
    for (const p of leftovers()) signal(p.pid, "SIGKILL")
    await sleep(5)
  }
}

const clearCgroups = async (dirs) => {
  const deadline = performance.now() + SETTLE_MS
  while (dirs.some((d) => !Kernel.removeCgroup(d)) && performance.now() < deadline) await sleep(10)
}

const describeFailure = (cause) =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => `crashed: ${Cause.pretty(cause)}`,
    onSome: (error) =>
      error instanceof SoakFailure
        ? error.message
        : error._tag === "TimeoutException"
        ? `timed out after ${(scenario.timeoutMs ?? 30_000) / 1000} s`
        : `${error._tag ?? "error"}: ${error.message}`
  })

const result = {
  id: label,
  iterations,
  ran: 0,
  leftovers: 0,
  leftoverSamples: [],
  emptyCgroups: 0,
  cgroupSample: undefined,
  fdLeak: 0,
  maxRss: 0,
  rssAfter: [],
  heapAfter: [],
  failures: [],
  samples: {}
}
let fdBaseline

for (let iteration = 1; iteration <= iterations; iteration++) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-soak-"))
  tokens = new Set()
  const ctx = {
    iteration,
    backend: args.backend,
    stateDir,
    /** A fresh token of 9 digits: put it in what the scenario starts (sleep 6<token>) so the leftover check finds it anywhere. */
    token: () => {
      const token = String(randomInt(100_000_000, 1_000_000_000))
      tokens.add(token)
      return token
    },
    /** What the iteration is doing, for a scenario to set: named when it hangs. */
    phase: undefined,
    floodBytes: Number(args["flood-bytes"]),
    record: (name, value) => (result.samples[name] ??= []).push(value)
  }
  Kernel.resetPeakRss()
  // only the message is kept: a failed Exit holds on to the fiber's context, the registry's buffers included
  const timeoutMs = scenario.timeoutMs ?? 30_000
  // the timeout interrupts the iteration, and the interruption waits for its finalizers: one that never returns would hang the runner
  let watchdog
  const failed = await Promise.race([
    Effect.runPromiseExit(scenario.run(ctx).pipe(Effect.timeout(timeoutMs))).then(
      (exit) => (Exit.isFailure(exit) ? describeFailure(exit.cause) : undefined)
    ),
    new Promise((resolve) => {
      watchdog = setTimeout(() => {
        hung = true
        resolve(
          `hung: still running ${(timeoutMs + HUNG_MS) / 1000} s after it began, though its ${timeoutMs / 1000} s timeout interrupted it ` +
            `(an uninterruptible stop, or a finalizer that never returns)${ctx.phase === undefined ? "" : `; it was at: ${ctx.phase}`}; no further iteration runs`
        )
      }, timeoutMs + HUNG_MS)
    })
  ])
  clearTimeout(watchdog)
  if (hung) console.error(`  ${label} #${iteration}: hung with these processes alive: ${Kernel.liveOthers().map(Kernel.describeFully).join("; ")}`)
  result.ran++
  if (failed !== undefined) {
    result.failures.push({ iteration, message: failed })
    console.error(`  ${label} #${iteration}: FAIL ${failed}`)
  }
  const left = await settle(leftovers, (live) => live.length === 0, SETTLE_MS)
  if (left.length > 0) {
    result.leftovers += left.length
    result.leftoverSamples.push(...left.slice(0, 5).map((p) => `#${iteration} ${Kernel.describe(p)}`))
    console.error(`  ${label} #${iteration}: ${left.length} leftover processes: ${left.map(Kernel.describe).join("; ")}`)
    const still = await clear()
    if (still.length > 0) console.error(`  ${label} #${iteration}: could not clear ${still.map(Kernel.describe).join("; ")}`)
  }
  // A populated one holds processes: a leftover. An empty one is a directory
  // that a dead supervisor (its watcher does not remove it) left for a later
  // corral of this PID namespace to reap; this namespace has none, so the
  // soak counts it apart and removes it, or every run would add to the host's.
  const cgroups = cgroupLeftovers()
  if (cgroups.length > 0) {
    const populated = cgroups.filter(Kernel.cgroupPopulated)
    if (populated.length > 0) {
      result.leftovers += populated.length
      result.leftoverSamples.push(...populated.slice(0, 5).map((dir) => `#${iteration} populated cgroup ${dir}`))
      console.error(`  ${label} #${iteration}: ${populated.length} populated cgroups left: ${populated.join("; ")}`)
    }
    result.emptyCgroups += cgroups.length - populated.length
    if (result.cgroupSample === undefined) result.cgroupSample = cgroups.find((dir) => !populated.includes(dir))
    await clearCgroups(cgroups)
  }
  fs.rmSync(stateDir, { recursive: true, force: true })
  // Node keeps a /dev/null descriptor open after its first spawn: the baseline is taken after the first iteration
  const fds = await settle(Kernel.openDescriptors, (n) => fdBaseline === undefined || n <= fdBaseline, 1000)
  fdBaseline ??= fds
  result.fdLeak = Math.max(result.fdLeak, fds - fdBaseline)
  result.maxRss = Math.max(result.maxRss, Kernel.peakRss())
  // a second collection after a tick: the first leaves floating garbage behind
  globalThis.gc()
  await sleep(10)
  globalThis.gc()
  const memory = process.memoryUsage()
  result.rssAfter.push(memory.rss)
  result.heapAfter.push(memory.heapUsed + memory.arrayBuffers)
  // after every iteration: a runner killed later (the soak's own limit) still leaves what it found
  fs.writeFileSync(args.result, JSON.stringify(result))
  if (hung) break
}

fs.writeFileSync(args.result, JSON.stringify(result))
process.exit(0)
