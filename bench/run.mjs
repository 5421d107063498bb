#!/usr/bin/env node
// corral and its peers, side by side, in one run.
//
//   npm run bench [-- --quick] [--only stop|registry|<id prefix>[,...]] [--impl a,b] [--runs N] [--rounds N]
//
// Each stop scenario also runs corral alone under the procScan containment
// backend, as `<id>@procScan`; the plain id has corral under the default
// (auto: cgroup v2 where it works).
//
// Every (scenario, implementation) batch runs in a worker inside a PID
// namespace of its own (see lib/namespace.mjs). A scenario with more than one
// implementation is measured in rounds: each round runs one batch of each in
// turn, with a share of the runs, so a slow minute of this shared machine
// falls on all of them, not on whichever ran then (ADR 30). Results go to
// bench/results/latest.json, docs/benchmarks.md, docs/bench/*.svg and
// bench/results/headline.md. With --only or --impl, the new figures replace
// the same ids in the existing latest.json and the rest is kept.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { runBatch } from "./lib/namespace.mjs"
import { IMPL_ORDER, renderHeadline, writeReports } from "./lib/report.mjs"
import { evaluate, summarize } from "./lib/summary.mjs"
import { scenarios } from "./scenarios/index.mjs"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const LATEST = path.join(ROOT, "bench", "results", "latest.json")
const BATCH_TIMEOUT_MS = 180_000

const usage = "usage: node bench/run.mjs [--quick] [--only stop|registry|<id prefix>[,...]] [--impl a,b] [--runs N] [--rounds N]"

const options = {
  quick: { type: "boolean", default: false },
  only: { type: "string" },
  impl: { type: "string" },
  runs: { type: "string" },
  rounds: { type: "string" },
  help: { type: "boolean", default: false }
}

const parseOptions = () => {
  let values
  try {
    values = parseArgs({ options }).values
  } catch (error) {
    fail(error.message)
  }
  if (values.help) {
    console.log(usage)
    process.exit(0)
  }
  const [runs, rounds] = ["runs", "rounds"].map((name) => {
    const n = values[name] === undefined ? undefined : Number(values[name])
    if (n !== undefined && !(Number.isInteger(n) && n > 0)) fail(`--${name} must be a positive integer, got "${values[name]}"`)
    return n
  })
  return {
    quick: values.quick,
    only: values.only?.split(",").filter(Boolean),
    impls: values.impl?.split(",").filter(Boolean),
    runs,
    rounds
  }
}

const fail = (message) => {
  console.error(`bench: ${message}\n${usage}`)
  process.exit(2)
}

/** `--only stop` and `--only registry` pick a suite; anything else is an id prefix. */
const select = ({ only, impls }) => {
  const chosen = only === undefined
    ? scenarios
    : scenarios.filter((s) => only.some((o) => s.suite === o || s.id.startsWith(o)))
  if (chosen.length === 0) fail(`--only ${only.join(",")} matches no scenario; ids: ${scenarios.map((s) => s.id).join(", ")}`)
  const unknown = impls?.filter((i) => !IMPL_ORDER.includes(i)) ?? []
  if (unknown.length > 0) fail(`unknown implementation ${unknown.join(", ")}; known: ${IMPL_ORDER.join(", ")}`)
  // an `<id>@<backend>` scenario has corral alone: with `--impl` naming no corral it has nothing to run
  return chosen
    .map((s) => ({ scenario: s, impls: s.impls.filter((i) => impls === undefined || impls.includes(i)) }))
    .filter((b) => b.impls.length > 0)
}

const checkPrerequisites = () => {
  if (!fs.existsSync(path.join(ROOT, "packages", "core", "dist", "index.js"))) {
    fail("packages/core/dist is missing: build first with `npx tsc -b`")
  }
  const probe = spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"], { stdio: "ignore" })
  if (probe.status !== 0) {
    fail("cannot create a PID namespace (`unshare --pid --fork --mount-proc` needs root on Linux); the bench orphans processes on purpose and will not run outside one")
  }
}

const machine = () => ({
  loadAverage: os.loadavg().map((l) => +l.toFixed(2)),
  cpu: os.cpus()[0]?.model.trim() ?? "unknown",
  cpus: os.cpus().length,
  memoryGiB: Math.round(os.totalmem() / 1024 ** 3),
  os: `${os.type()} ${os.release()} ${os.arch()}`,
  node: process.versions.node
})

/** In --quick, batches that would cost more than they tell are skipped, with the reason shown in the tables. */
const skipReason = (scenario, impl, quick) => (quick ? scenario.quickSkip?.[impl] : undefined)

const show = (id, impl, text) => console.error(`${id.padEnd(38)} ${impl.padEnd(15)} ${text}`)

/** A failed batch in one line: how it ended, and the worker's own error when it printed one. */
const failureText = (message) => {
  const [first, ...rest] = message.split("\n")
  const thrown = rest.map((l) => /^\w*Error: (.*)$/.exec(l.trim())?.[1]).find((l) => l !== undefined)
  return thrown === undefined ? first : `${first}: ${thrown}`
}

/** Rounds of a scenario: where it has more than one implementation, `DEFAULT_ROUNDS` of a full run, one of a quick run. */
const DEFAULT_ROUNDS = 3

/** The runs of round `round` of `rounds`: as even a share of `runs` as can be, never none. */
const shareOf = (runs, rounds, round) => Math.floor((runs * (round + 1)) / rounds) - Math.floor((runs * round) / rounds)

const runScenario = async ({ scenario, impls }, options) => {
  const result = {
    id: scenario.id,
    unit: scenario.unit,
    better: scenario.better,
    workload: scenario.workload,
    pid1: scenario.pid1,
    peers: {}
  }
  if (scenario.grace !== undefined) result.grace = scenario.grace
  const runs = options.runs ?? scenario.runs[options.quick ? "quick" : "full"]
  const measured = impls.filter((impl) => {
    const skipped = skipReason(scenario, impl, options.quick)
    if (skipped !== undefined) {
      ;(result.skipped ??= {})[impl] = skipped
      show(scenario.id, impl, skipped)
    }
    return skipped === undefined
  })
  const rounds = Math.min(runs, measured.length < 2 ? 1 : options.rounds ?? (options.quick ? 1 : DEFAULT_ROUNDS))
  const samples = new Map(measured.map((impl) => [impl, []]))
  const wall = new Map(measured.map((impl) => [impl, 0]))
  for (let round = 0; round < rounds; round++) {
    // an implementation that failed, or hung (a finding, not a figure), is not run again; every other round
    // runs them in the reverse order, so none is always first after another's batch
    const order = round % 2 === 0 ? measured : [...measured].reverse()
    for (const impl of order.filter((i) => samples.has(i) && !samples.get(i).some((s) => s.timedOut))) {
      const began = performance.now()
      try {
        const batch = { id: scenario.id, impl, runs: shareOf(runs, rounds, round), quick: options.quick }
        samples.get(impl).push(...(await runBatch(batch, { pid1: scenario.pid1, timeoutMs: BATCH_TIMEOUT_MS })).samples)
        wall.set(impl, wall.get(impl) + performance.now() - began)
      } catch (error) {
        samples.delete(impl)
        ;(result.failed ??= {})[impl] = failureText(error.message)
        show(scenario.id, impl, `FAILED${round > 0 ? ` in round ${round + 1} of ${rounds}` : ""}\n${error.message}`)
      }
    }
  }
  for (const [impl, measuredSamples] of samples) {
    const figure = summarize(measuredSamples, scenario.extras)
    if (impl === "corral") result.corral = figure
    else result.peers[impl] = figure
    const inRounds = rounds > 1 ? `, ${rounds} rounds` : ""
    show(scenario.id, impl, `${figure.median} ${scenario.unit} (${figure.min}–${figure.max})${figure.clean ? "" : " NOT CLEAN"} [${(wall.get(impl) / 1000).toFixed(1)} s${inRounds}]`)
  }
  return result
}

/**
 * One id's previous result with a fresh one laid over it: a fresh figure
 * replaces the old one, a fresh failure drops it (an old figure beside a new
 * failure would read as measured now), and an old failure goes once the
 * implementation has a fresh figure. A fresh skip keeps the old figure.
 */
const mergeOne = (old, r) => {
  const failedNow = Object.keys(r.failed ?? {})
  const measuredNow = [...(r.corral === undefined ? [] : ["corral"]), ...Object.keys(r.peers)]
  const peers = { ...old.peers, ...r.peers }
  for (const impl of failedNow) delete peers[impl]
  const failed = {
    ...Object.fromEntries(Object.entries(old.failed ?? {}).filter(([impl]) => !measuredNow.includes(impl))),
    ...r.failed
  }
  const merged = { ...old, ...r, corral: failedNow.includes("corral") ? undefined : r.corral ?? old.corral, peers }
  if (merged.corral === undefined) delete merged.corral
  if (Object.keys(failed).length > 0) merged.failed = failed
  else delete merged.failed
  return merged
}

/** With --only/--impl, the fresh figures replace their ids (and implementations) in the previous results. */
const merge = (previous, fresh) => {
  const byId = new Map(previous.map((r) => [r.id, r]))
  for (const r of fresh) {
    const old = byId.get(r.id)
    byId.set(r.id, old === undefined ? r : mergeOne(old, r))
  }
  const order = scenarios.map((s) => s.id)
  return [...byId.values()].sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id))
}

const readPrevious = () => {
  try {
    return JSON.parse(fs.readFileSync(LATEST, "utf8")).results ?? []
  } catch {
    return []
  }
}

const main = async () => {
  const options = parseOptions()
  const batches = select(options)
  checkPrerequisites()
  const host = machine()
  const began = performance.now()
  const fresh = []
  for (const batch of batches) fresh.push(await runScenario(batch, options))
  const generatedAt = new Date().toISOString()
  for (const r of fresh) r.measuredAt = generatedAt
  const partial = options.only !== undefined || options.impls !== undefined
  const results = partial ? merge(readPrevious(), fresh) : fresh
  evaluate(results)
  const data = { generatedAt, machine: host, results }
  const wallSeconds = (performance.now() - began) / 1000
  const command = ["npm run bench", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ")
  fs.mkdirSync(path.dirname(LATEST), { recursive: true })
  fs.writeFileSync(LATEST, JSON.stringify(data, null, 2) + "\n")
  writeReports(ROOT, data, { command, wallSeconds })
  console.log(renderHeadline(data))
  for (const r of results) {
    for (const t of [r.target, r.reference].filter(Boolean)) {
      const verdict = t.met === null ? "not measured" : t.met ? "met" : "MISSED"
      console.log(`${r.id}: ${t.text}: ${t.measured} (${verdict})`)
    }
  }
  console.log(`\nbench: ${Math.round(wallSeconds)} s; wrote bench/results/latest.json, docs/benchmarks.md, docs/bench/*.svg, bench/results/headline.md`)
}

main().catch((error) => {
  console.error(error?.stack ?? String(error))
  process.exit(1)
})
