#!/usr/bin/env node
// corral and its peers, side by side, in one run.
//
//   npm run bench [-- --quick] [--only stop|registry|<id prefix>[,...]] [--impl a,b] [--runs N]
//
// Each stop scenario also runs corral alone under the procScan containment
// backend, as `<id>@procScan`; the plain id has corral under the default
// (auto: cgroup v2 where it works).
//
// Every (scenario, implementation) batch runs in a worker inside a PID
// namespace of its own (see lib/namespace.mjs). Results go to
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

const usage = "usage: node bench/run.mjs [--quick] [--only stop|registry|<id prefix>[,...]] [--impl a,b] [--runs N]"

const options = {
  quick: { type: "boolean", default: false },
  only: { type: "string" },
  impl: { type: "string" },
  runs: { type: "string" },
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
  const runs = values.runs === undefined ? undefined : Number(values.runs)
  if (runs !== undefined && !(Number.isInteger(runs) && runs > 0)) fail(`--runs must be a positive integer, got "${values.runs}"`)
  return {
    quick: values.quick,
    only: values.only?.split(",").filter(Boolean),
    impls: values.impl?.split(",").filter(Boolean),
    runs
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
  for (const impl of impls) {
    const skipped = skipReason(scenario, impl, options.quick)
    if (skipped !== undefined) {
      ;(result.skipped ??= {})[impl] = skipped
      show(scenario.id, impl, skipped)
      continue
    }
    const began = performance.now()
    try {
      const { samples } = await runBatch({ id: scenario.id, impl, runs, quick: options.quick }, {
        pid1: scenario.pid1,
        timeoutMs: BATCH_TIMEOUT_MS
      })
      const figure = summarize(samples, scenario.extras)
      if (impl === "corral") result.corral = figure
      else result.peers[impl] = figure
      const wall = ((performance.now() - began) / 1000).toFixed(1)
      show(scenario.id, impl, `${figure.median} ${scenario.unit} (${figure.min}–${figure.max})${figure.clean ? "" : " NOT CLEAN"} [${wall} s]`)
    } catch (error) {
      ;(result.failed ??= {})[impl] = failureText(error.message)
      show(scenario.id, impl, `FAILED\n${error.message}`)
    }
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
