#!/usr/bin/env node
// npm run soak -- [--iterations N] [--only SCENARIO[@BACKEND][,...]] [--backend BACKEND[,...]|all] [--no-pidns]
//
// The fault matrix: each scenario runs N times on each containment backend
// this machine offers (a backend is offered when its Containment.layer
// builds here): cgroup and procScan by default, pidns too with --backend all
// or when named, inside a PID namespace of its own, with its runner as the
// namespace's non-reaping PID 1. Rows are named SCENARIO@BACKEND. After every
// iteration the runner counts the live processes and corral cgroups left, the
// descriptors it leaked and its memory. Prints the matrix; exits 1 on any
// leak or failure.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { backends as allBackends, Containment, Limits, ProcessTable } from "@corral/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { pidnsFlags } from "../scripts/pidns-flags.mjs"
import { scenarios } from "./soak/scenarios/index.mjs"

const MiB = 2 ** 20
const GiB = 2 ** 30
// Memory a scenario may gain from its first iteration to its last. The JS heap
// after a full collection is where a leak of corral's own objects shows, and a
// healthy run settles within about 1 MiB. RSS is far noisier: V8 and malloc
// keep taking memory for a hundred iterations before they level off (about
// 45 MiB over 20 forker iterations), so only a gross growth counts.
const HEAP_GROWTH_LIMIT = 4 * MiB
const RSS_GROWTH_LIMIT = 128 * MiB

const usage = "usage: npm run soak -- [--iterations N] [--only SCENARIO[@BACKEND][,...]] [--backend BACKEND[,...]|all] [--no-pidns]"
const parsed = (() => {
  try {
    return parseArgs({
      options: {
        iterations: { type: "string", default: "20" },
        only: { type: "string" },
        backend: { type: "string" },
        "no-pidns": { type: "boolean", default: false },
        help: { type: "boolean", default: false }
      }
    })
  } catch (error) {
    console.error(`soak: ${error.message}\n${usage}`)
    process.exit(2)
  }
})()
const args = parsed.values
if (args.help) {
  console.log(`${usage}\nscenarios: ${scenarios.map((s) => s.id).join(", ")}; backends: ${allBackends.join(", ")}`)
  process.exit(0)
}
const iterations = Number(args.iterations)
if (!Number.isInteger(iterations) || iterations < 1) {
  console.error(`--iterations must be a positive integer, got ${JSON.stringify(args.iterations)}`)
  process.exit(2)
}
// --only takes SCENARIO (on each backend run, see --backend) or SCENARIO@BACKEND
const wanted = args.only?.split(",").map((s) => s.trim()).filter((s) => s !== "").map((s) => {
  const [id, backend] = s.split("@")
  return { id, backend }
})
const unknown = wanted?.filter(({ id }) => !scenarios.some((s) => s.id === id)).map(({ id }) => id) ?? []
if (unknown.length > 0) {
  console.error(`unknown scenario ${unknown.join(", ")}; known: ${scenarios.map((s) => s.id).join(", ")}`)
  process.exit(2)
}
// --backend all: every backend available here
const backendFilter = args.backend === "all" ? undefined : args.backend?.split(",").map((s) => s.trim())
const askedBackends = [
  ...(backendFilter ?? []),
  ...(wanted?.flatMap(({ backend }) => (backend === undefined ? [] : [backend])) ?? [])
]
const unknownBackends = askedBackends.filter((b) => !allBackends.includes(b))
if (unknownBackends.length > 0) {
  console.error(`unknown backend ${unknownBackends.join(", ")}; known: ${allBackends.join(", ")}`)
  process.exit(2)
}

/** Why each backend of core's list cannot be used here (its layer does not build: no writable cgroup v2, no unshare...); absent when it can. */
const whyNot = {}
for (const backend of allBackends) {
  const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(
    Containment.layer(backend).pipe(Layer.provide(Layer.merge(ProcessTable.layer, Limits.layer)))
  )))
  if (Exit.isFailure(exit)) {
    whyNot[backend] = Option.match(Cause.failureOption(exit.cause), { onNone: () => Cause.pretty(exit.cause), onSome: (error) => error.message })
  }
}
const available = allBackends.filter((b) => whyNot[b] === undefined)
const missing = [...new Set(askedBackends.filter((b) => !available.includes(b)))]
if (missing.length > 0) {
  console.error(missing.map((b) => `backend ${b} is not available here: ${whyNot[b]}`).join("\n"))
  process.exit(2)
}
// pidns came after the soak's brief (cgroup where it works, and procScan); it runs when asked for
const DEFAULT_BACKENDS = ["cgroup", "procScan"]
const backends = available.filter((b) =>
  backendFilter !== undefined ? backendFilter.includes(b) : args.backend === "all" || DEFAULT_BACKENDS.includes(b)
)

/** The matrix's rows: each selected scenario on each backend, as { scenario, backend, id: "SCENARIO@BACKEND" }. */
const selected = scenarios.flatMap((scenario) =>
  available
    .filter((backend) =>
      wanted === undefined
        ? backends.includes(backend)
        : wanted.some((w) => w.id === scenario.id && (w.backend === undefined ? backends.includes(backend) : w.backend === backend))
    )
    .map((backend) => ({ scenario, backend, id: `${scenario.id}@${backend}` }))
)

// as root a plain PID namespace; as anyone else, one owned by a user namespace of their own uid
const namespaceFlags = args["no-pidns"] ? undefined : pidnsFlags()
const canNamespace = namespaceFlags !== undefined
const floodBytes = iterations <= 3 ? GiB : 4 * GiB
const runnerPath = new URL("./soak/runner.mjs", import.meta.url).pathname
const resultsDir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-soak-results-"))

console.log(`corral soak: ${iterations} iteration(s) per scenario, ${selected.length} scenario run(s) (SCENARIO@BACKEND)`)
console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg()[0].toFixed(1)}, Node ${process.version}`)
console.log(
  canNamespace
    ? `isolation: one PID namespace per scenario (unshare ${namespaceFlags.join(" ")}), runner = non-reaping PID 1`
    : "isolation: NONE. No PID namespace (unshare not permitted, or --no-pidns): scenarios that orphan processes are SKIPPED, leftovers are counted by CORRAL_SHELL_ID and the scenarios' argv/environment tokens only, corral cgroups not at all"
)
const ran = available.filter((b) => selected.some((row) => row.backend === b))
console.log(
  `containment backends: ${ran.join(", ")}` +
    (ran.length < available.length ? ` (available: ${available.join(", ")}; --backend all runs every one)` : "") +
    Object.entries(whyNot).map(([b, why]) => ` (${b} unavailable: ${why})`).join("")
)
if (selected.some((s) => s.scenario.id === "output-flood")) {
  console.log(`output-flood: ${floodBytes / GiB} GiB per iteration${floodBytes < 4 * GiB ? " (reduced from 4 GiB because --iterations <= 3)" : ""}`)
}
console.log("")

const runScenario = ({ scenario, backend, id }) =>
  new Promise((resolve) => {
    const resultFile = path.join(resultsDir, `${id}.json`)
    const runner = [process.execPath, "--expose-gc", runnerPath, "--scenario", scenario.id, "--backend", backend, "--iterations", String(iterations), "--flood-bytes", String(floodBytes), "--result", resultFile]
    const [command, argv] = canNamespace
      ? ["unshare", [...namespaceFlags, "--kill-child", ...runner, "--pidns"]]
      : [runner[0], runner.slice(1)]
    const began = performance.now()
    const child = spawn(command, argv, { stdio: ["ignore", "inherit", "inherit"] })
    // a runner that hangs past every iteration's own timeout is killed with its namespace
    const limitMs = iterations * ((scenario.timeoutMs ?? 30_000) + 10_000) + 30_000
    const timer = setTimeout(() => child.kill("SIGKILL"), limitMs)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      const seconds = (performance.now() - began) / 1000
      try {
        const result = JSON.parse(fs.readFileSync(resultFile, "utf8"))
        // the runner writes its result after each iteration: one killed midway leaves the iterations it finished
        if (code !== 0) {
          result.failures.push({ iteration: result.ran + 1, message: `runner died (${signal ?? `exit ${code}`}) after ${result.ran} iteration(s)` })
        } else if (result.ran < iterations && !result.failures.some((f) => f.message.startsWith("hung:"))) {
          result.failures.push({ iteration: result.ran + 1, message: `runner stopped after ${result.ran} of ${iterations} iterations` })
        }
        resolve({ ...result, seconds })
      } catch {
        resolve({ id, iterations, ran: 0, leftovers: 0, leftoverSamples: [], fdLeak: 0, maxRss: 0, rssAfter: [], heapAfter: [], samples: {}, seconds, failures: [{ iteration: 0, message: `runner died (${signal ?? `exit ${code}`}) without a result` }] })
      }
    })
  })

const growth = (series) => (series.length < 2 ? 0 : series.at(-1) - series[0])

const leaksMemory = (r) => growth(r.heapAfter) > HEAP_GROWTH_LIMIT || growth(r.rssAfter) > RSS_GROWTH_LIMIT

const verdict = (r) =>
  r.skipped ? "skipped" : r.failures.length > 0 || r.leftovers > 0 || r.fdLeak > 0 || leaksMemory(r) ? "FAIL" : "ok"

const mib = (bytes) => `${(bytes / MiB).toFixed(1)}`

const signedMib = (bytes) => `${bytes >= 0 ? "+" : ""}${mib(bytes)}`

const results = []
for (const row of selected) {
  const { scenario, id } = row
  if (!canNamespace && scenario.orphans) {
    results.push({ id, skipped: true, reason: "orphans processes on purpose: needs a PID namespace" })
    console.log(`${id}: skipped (orphans processes on purpose; without a PID namespace they would stay zombies of the machine's PID 1)`)
    continue
  }
  process.stdout.write(`${id}: ${scenario.summary} ... `)
  const result = await runScenario(row)
  results.push(result)
  console.log(`${verdict(result)} (${result.seconds.toFixed(1)} s)`)
}
fs.rmSync(resultsDir, { recursive: true, force: true })

const header = ["scenario", "result", "runs", "leftovers", "empty cgroups", "fd leak", "heap growth MiB", "max RSS MiB", "RSS growth MiB", "failures", "time s"]
const rows = results.map((r) =>
  r.skipped
    ? [r.id, "skipped", "-", "-", "-", "-", "-", "-", "-", "-", "-"]
    : [
      r.id,
      verdict(r),
      `${r.ran}/${r.iterations}`,
      String(r.leftovers),
      r.emptyCgroups === undefined ? "-" : String(r.emptyCgroups),
      r.ran < 2 ? "n/a" : String(r.fdLeak),
      r.ran < 2 ? "n/a" : signedMib(growth(r.heapAfter)),
      mib(r.maxRss),
      r.ran < 2 ? "n/a" : signedMib(growth(r.rssAfter)),
      String(r.failures.length),
      r.seconds.toFixed(1)
    ]
)
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)))
const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd()
console.log("")
console.log(line(header))
console.log(line(widths.map((w) => "-".repeat(w))))
for (const row of rows) console.log(line(row))

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]
const round = (x) => (Math.abs(x) >= 100 ? Math.round(x) : Number(x.toFixed(1)))
console.log("")
for (const r of results.filter((r) => !r.skipped)) {
  const figures = Object.entries(r.samples).map(([name, xs]) => `${name} median ${round(median(xs))} min ${round(Math.min(...xs))} max ${round(Math.max(...xs))}`)
  if (figures.length > 0) console.log(`${r.id}: ${figures.join("; ")}`)
}
const withCgroups = results.filter((r) => r.emptyCgroups > 0)
if (withCgroups.length > 0) {
  console.log("")
  console.log(
    `note: empty corral cgroups were left behind by ${withCgroups.map((r) => `${r.id} (${r.emptyCgroups})`).join(", ")}, ` +
      `e.g. ${withCgroups[0].cgroupSample}. A supervisor that dies leaves its cgroups for a later corral of the same PID namespace ` +
      `to reap; in a namespace that ends first they would stay on the host for good. The soak removed them; not counted as a failure.`
  )
}
const problems = results.filter((r) => verdict(r) === "FAIL")
for (const r of problems) {
  console.log("")
  console.log(`${r.id} FAILED:`)
  for (const f of r.failures.slice(0, 5)) console.log(`  iteration ${f.iteration}: ${f.message}`)
  if (r.failures.length > 5) console.log(`  ... and ${r.failures.length - 5} more failures`)
  for (const s of r.leftoverSamples.slice(0, 5)) console.log(`  leftover ${s}`)
  if (r.fdLeak > 0) console.log(`  ${r.fdLeak} descriptor(s) above the baseline taken after the first iteration`)
  if (growth(r.heapAfter) > HEAP_GROWTH_LIMIT) {
    console.log(`  the JS heap grew ${mib(growth(r.heapAfter))} MiB from the first iteration to the last (limit ${mib(HEAP_GROWTH_LIMIT)} MiB)`)
  }
  if (growth(r.rssAfter) > RSS_GROWTH_LIMIT) {
    console.log(`  RSS grew ${mib(growth(r.rssAfter))} MiB from the first iteration to the last (limit ${mib(RSS_GROWTH_LIMIT)} MiB)`)
  }
}
console.log("")
console.log(problems.length === 0 ? "soak: no leak, no failure" : `soak: ${problems.length} scenario(s) failed: ${problems.map((r) => r.id).join(", ")}`)
process.exit(problems.length === 0 ? 0 : 1)
