// Runs one scenario N times, as PID 1 of its own PID namespace when the soak
// could make one, and checks after each iteration what the kernel says is
// left: live processes, this supervisor's descriptors, its memory.
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
    iterations: { type: "string" },
    "flood-bytes": { type: "string" },
    result: { type: "string" },
    pidns: { type: "boolean", default: false }
  }
})
// only this scenario's module: what the others import would count in this runner's memory
const { default: scenario } = await import(`./scenarios/${args.scenario}.mjs`)
const iterations = Number(args.iterations)
const SETTLE_MS = 2000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Inside the namespace everything but this runner is a leftover; outside, only what carries this runner's shell tags. */
const leftovers = () => {
  const ours = `${process.pid}:`
  return Kernel.liveOthers().filter((p) => args.pidns || (Kernel.shellIdOf(p.pid) ?? "").startsWith(ours))
}

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

const clear = async (processes) => {
  for (const p of processes) {
    try {
      process.kill(p.pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
  await settle(leftovers, (live) => live.length === 0, SETTLE_MS)
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
  id: scenario.id,
  iterations,
  ran: 0,
  leftovers: 0,
  leftoverSamples: [],
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
  const ctx = {
    iteration,
    stateDir,
    floodBytes: Number(args["flood-bytes"]),
    record: (name, value) => (result.samples[name] ??= []).push(value)
  }
  Kernel.resetPeakRss()
  // only the message is kept: a failed Exit holds on to the fiber's context, the registry's buffers included
  const failed = await Effect.runPromiseExit(scenario.run(ctx).pipe(Effect.timeout(scenario.timeoutMs ?? 30_000))).then(
    (exit) => (Exit.isFailure(exit) ? describeFailure(exit.cause) : undefined)
  )
  result.ran++
  if (failed !== undefined) {
    result.failures.push({ iteration, message: failed })
    console.error(`  ${scenario.id} #${iteration}: FAIL ${failed}`)
  }
  const left = await settle(leftovers, (live) => live.length === 0, SETTLE_MS)
  if (left.length > 0) {
    result.leftovers += left.length
    result.leftoverSamples.push(...left.slice(0, 5).map((p) => `#${iteration} ${Kernel.describe(p)}`))
    console.error(`  ${scenario.id} #${iteration}: ${left.length} leftover processes: ${left.map(Kernel.describe).join("; ")}`)
    await clear(left)
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
}

fs.writeFileSync(args.result, JSON.stringify(result))
process.exit(0)
