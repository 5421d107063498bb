// docs/benchmarks.md, its charts and the README headline, all rendered from
// latest.json: no figure in them is typed by hand.
import * as fs from "node:fs"
import * as path from "node:path"
import { barChart } from "./chart.mjs"
import { HANG_MARGIN_MS, SETTLE_MS } from "./measure.mjs"
import { CORRAL_BACKENDS } from "./peers.mjs"
import { baseId } from "./summary.mjs"

export const IMPL_ORDER = ["corral", "lower-bound", "opencode-pr", "effect-command", "execa", "tree-kill"]

/**
 * The columns of every table: corral under its default containment, corral
 * under each other backend (the `<id>@<backend>` results, folded into the
 * row of `<id>`), then the peers.
 */
const COLUMNS = ["corral", ...CORRAL_BACKENDS.map((b) => `corral@${b}`), ...IMPL_ORDER.slice(1)]

const IMPLS = {
  corral:
    "In the `stop.*` scenarios, `ProcessGroup.spawn` and `ProcessGroup.stopAll` (for one group the same stop as `group.stop()`) under `Containment.layer(\"auto\")`, which picks the cgroup backend where a writable cgroup v2 hierarchy is there (as root here; the column header names the backend the runs reported): each shell runs in a cgroup of its own, joined before its command is exec'd, so membership is exact (`cgroup.procs`) and the kill is `cgroup.kill`. The stop is the same for every backend: SIGTERM and SIGCONT to every member, a zombie-aware wait up to the grace (re-reading the known members after pauses that grow from 1 to 10 ms (50 ms while an event is still to come), waking on the leader's exit and its pipes closing), then kill rounds 10 ms apart and doubling, for at most 1 s. The `corral (procScan)` column is the `<id>@procScan` result: the same scenario under `Containment.layer(\"procScan\")`, where membership is the process group, the session, the `CORRAL_SHELL_ID` tag chain and the descendant tree, found by scanning `/proc`, and the kill freezes before it strikes. In the registry scenarios, `ShellRegistry` as users run it, crash safety on (watcher process, journal in a temporary state directory): `registry.start` and `registry.kill`; `stopall.200` releases the registry layer, whose shutdown stops every shell with one shared scan per tick; ingest goes through a registry shell's `OutputBuffer`; reads call `bash_output` through the `ShellTools` toolkit.",
  "lower-bound":
    "Raw `child_process.spawn` with `detached: true`, `process.kill(-pgid, \"SIGTERM\")`, then the leader's `exit` event; nothing checks the rest of the group. If the leader ignores SIGTERM, one group SIGKILL at the end of the grace. For output, a raw pipe drain (`stdout.on(\"data\")`); for reads, one decode of a contiguous buffer.",
  "opencode-pr":
    "The approach of the opencode PR in `seeds/opencode-pr-kill-whole-group.txt`: SIGTERM the group, poll `kill(-pgid, 0)` every 10 ms until ESRCH for up to the grace, then SIGKILL the group every 10 ms until ESRCH, for at most 1 s.",
  "effect-command":
    "`@effect/platform` v3 `Command.start` under `NodeContext.layer` (NodeCommandExecutor), stopped by closing its scope. For output, `Stream.runFold` over the process's stdout.",
  execa:
    "execa 9.6.1 (execa 10 needs Node 22) with `detached: true`, so the child leads its own group, stopped as execa 10's `killDescendants` with `forceKillAfterDelay` stops it: SIGTERM to the group, SIGKILL to the group if the subprocess has not completed within the grace, then await the subprocess. For output, `buffer: false` and a data listener.",
  "tree-kill":
    "tree-kill 1.2.2: the child is spawned in the caller's group, as in tree-kill's README; `treeKill(pid, \"SIGTERM\")` walks the ppid tree with one `ps` per process, then the leader's `exit` is awaited; if it is still alive at the end of the grace, `treeKill(pid, \"SIGKILL\")`."
}

const FAMILIES = [
  { title: "Stopping a group", match: (id) => id.startsWith("stop.") },
  { title: "Starting one shell, stopping many", match: (id) => id === "start.background" || id.startsWith("stopall.") },
  { title: "Output ingest", match: (id) => id.startsWith("ingest.") },
  { title: "Reading output", match: (id) => id.startsWith("output.") },
  { title: "Memory per idle shell", match: (id) => id.startsWith("mem.") },
  { title: "Starting the corral bin", match: (id) => id === "start.cli" || id === "start.mcp" }
]

export const HEADLINE = [
  "stop.obedient.50.reaping",
  "stop.obedient.50.zombie-init",
  "stop.obedient.50.busy1000",
  "stop.stubborn.grace200",
  "stop.forker.1000",
  "stop.escaper",
  "stop.hopper",
  "stopall.200",
  "start.background",
  "ingest.1gib"
]

const num = (v) => {
  const a = Math.abs(v)
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2)
}

/** For a `corral@<backend>` column, the `<id>@<backend>` result folded into this row (see withBackends). */
const variantOf = (result, impl) => (impl.startsWith("corral@") ? result.backends?.[impl.slice("corral@".length)] : undefined)

const figureOf = (result, impl) =>
  impl.startsWith("corral@") ? variantOf(result, impl)?.corral : impl === "corral" ? result.corral : result.peers?.[impl]

/** Why an implementation has no figure in a result, if it has none. */
const missing = (result, impl) => {
  if (impl.startsWith("corral@")) {
    const variant = variantOf(result, impl)
    return variant === undefined ? undefined : missing(variant, "corral")
  }
  return result.failed?.[impl] !== undefined
    ? `✗ failed: ${result.failed[impl]}`
    : result.skipped?.[impl] !== undefined
    ? `not run: ${result.skipped[impl]}`
    : undefined
}

const missingShort = (result, impl) =>
  (impl.startsWith("corral@") ? variantOf(result, impl)?.failed?.corral : result.failed?.[impl]) !== undefined ? "failed" : "not run"

/**
 * One row per scenario: each `<id>@<backend>` result (corral alone, under
 * another containment backend) becomes the `corral@<backend>` column of the
 * `<id>` row. A variant whose plain id is not in the results keeps a row.
 */
const withBackends = (results) => {
  const ids = new Set(results.map((r) => r.id))
  const isVariant = (r) => baseId(r.id) !== r.id && ids.has(baseId(r.id))
  const variants = results.filter(isVariant)
  return results.filter((r) => !isVariant(r)).map((r) => {
    const mine = variants.filter((v) => baseId(v.id) === r.id)
    return mine.length === 0 ? r : { ...r, backends: Object.fromEntries(mine.map((v) => [v.id.slice(r.id.length + 1), v])) }
  })
}

/** A column's header: corral's names the backend its runs reported. */
const columnName = (impl, results) => {
  if (impl.startsWith("corral@")) return `corral (${impl.slice("corral@".length)})`
  if (impl !== "corral") return impl
  const used = [...new Set(results.map((r) => r.corral?.containment).filter(Boolean))]
  return used.length === 0 ? "corral" : `corral (${used.join(", ")})`
}

const hasColumn = (result, impl) => figureOf(result, impl) !== undefined || missing(result, impl) !== undefined

const implsOf = (results) => COLUMNS.filter((impl) => results.some((r) => hasColumn(r, impl)))

/** What went wrong in a figure, in the words the tables use. */
const warnings = (f) => {
  const out = []
  if (f.timedOut) out.push(`⏱ hung: gave up after ${num(f.max)} ms`)
  if (f.leftAlive) out.push(`⚠ left ${f.leftAlive} alive`)
  else if (f.aliveAtReturn) out.push(`⚠ ${f.aliveAtReturn} still alive at return`)
  return out
}

/** The same, short enough for a chart's margin. */
const chartWarnings = (f) => {
  const out = []
  if (f.timedOut) out.push("hung")
  if (f.leftAlive) out.push(`⚠ left ${f.leftAlive} alive`)
  else if (f.aliveAtReturn) out.push(`⚠ ${f.aliveAtReturn} alive at return`)
  return out
}

const cell = (result, impl) => {
  const f = figureOf(result, impl)
  if (f === undefined) return missing(result, impl) ?? "n/a"
  const unit = result.unit
  const body = f.min === f.max ? `${num(f.median)} ${unit}` : `${num(f.median)} ${unit} (${num(f.min)}–${num(f.max)})`
  return [body, ...warnings(f)].join(" ")
}

const shortCell = (result, impl) => {
  const f = figureOf(result, impl)
  if (f === undefined) return hasColumn(result, impl) ? missingShort(result, impl) : "n/a"
  return [`${num(f.median)} ${result.unit}`, ...warnings(f)].join(" ")
}

const table = (header, rows) =>
  [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n")

/**
 * One chart per corral backend: `<id>.svg` has corral under its default
 * containment, `<id>@<backend>.svg` corral under that backend; both have the
 * same peers (measured once, in the `<id>` batches).
 */
const chartsFor = (result) => [
  { id: result.id, corral: "corral" },
  ...Object.keys(result.backends ?? {}).map((backend) => ({ id: `${result.id}@${backend}`, corral: `corral@${backend}` }))
].map(({ id, corral }) => ({ id, svg: chartFor(result, id, [corral, ...IMPL_ORDER.slice(1)]) }))

const chartFor = (result, title, impls) =>
  barChart({
    title,
    unit: `${result.unit}, ${result.better ?? "lower"} is better`,
    rows: impls.filter((impl) => hasColumn(result, impl)).map((impl) => {
      const label = impl.startsWith("corral") ? columnName(impl, [result]) : impl
      const f = figureOf(result, impl)
      if (f === undefined) return { label, text: missingShort(result, impl), warn: true }
      const warn = chartWarnings(f)
      return {
        label,
        median: f.median,
        min: f.min,
        max: f.max,
        highlight: impl.startsWith("corral"),
        warn: warn.length > 0,
        text: [`${num(f.median)} ${result.unit}`, ...warn].join(", ")
      }
    })
  })

const verdictText = (t) => (t.met === null ? "not measured" : t.met ? "✅ met" : "❌ missed")

/** Each target, and after it the reference comparison a result may carry. */
const targetRows = (results) =>
  results.flatMap((r) => [r.target, r.reference].filter(Boolean).map((t) => [`\`${r.id}\``, t.text, t.measured, verdictText(t)]))

const familySection = (family, results) => {
  const mine = results.filter((r) => family.match(r.id))
  if (mine.length === 0) return []
  const impls = implsOf(mine)
  const rows = mine.map((r) => [`\`${r.id}\``, ...impls.map((impl) => cell(r, impl))])
  const details = mine.map((r) => `- \`${r.id}\`: ${[r.workload, ...detailsOf(r)].join("; ")}.`)
  const extras = extraTables(mine, impls)
  const backends = impls.filter((impl) => impl.startsWith("corral@"))
  const intro = backends.length === 0 ? [] : [
    `Each row is measured for corral once per containment backend: \`${columnName("corral", mine)}\` is the default (\`Containment.layer("auto")\`) under the plain id, ${
      backends.map((b) => `\`${columnName(b, mine)}\` is the \`<id>${b.slice("corral".length)}\` result`).join(", ")
    }. The peers have no backend and are measured once; each scenario has one chart per backend, with the same peers.`,
    ""
  ]
  const charts = mine.flatMap(chartsFor).map(({ id }) => `![${id}](bench/${id}.svg)`)
  return [`## ${family.title}`, "", ...intro, table(["Scenario", ...impls.map((impl) => columnName(impl, mine))], rows), "", ...details, "", ...extras, ...charts, ""]
}

const detailsOf = (r) => {
  const out = [`PID 1 ${r.pid1}`]
  if (r.grace !== undefined) out.push(`grace ${r.grace} ms`)
  if (r.ratio !== undefined) out.push(`corral is ${r.ratio}x ${r.ratioTo}`)
  if (r.reference !== undefined && r.reference.met !== null) out.push(`against the lower bound's own \`${r.id}\`: ${r.reference.measured}`)
  for (const [backend, v] of Object.entries(r.backends ?? {})) {
    if (v.ratio !== undefined) out.push(`corral under ${backend} is ${v.ratio}x ${v.ratioTo}`)
  }
  const peerRatios = Object.entries(r.peers).filter(([, p]) => p.ratio !== undefined)
  if (peerRatios.length > 0) {
    out.push(`each peer against its own \`${r.ratioTo}\`: ${peerRatios.map(([impl, p]) => `${impl} ${p.ratio}x`).join(", ")}`)
  }
  return out
}

/** Secondary figures some scenarios carry, each in a table of its own with the implementations that have it. */
const EXTRAS = [
  ["rssGrowthKiB", "Peak RSS growth of the supervisor (KiB, worst run)"],
  ["heapKiB", "V8 heap growth per idle shell (KiB, median)"],
  [
    "noCrashSafetyMs",
    "corral's start without crash safety (`crashSafety: false`: no watcher message, no journal write), timed in the same batch, alternating with the crash-safe registry (ms, median (min–max))"
  ],
  [
    "rawSpawnMs",
    "A raw spawn (`child_process.spawn`, awaiting `spawn`) from corral's own batch, between its starts: the same process, the same memory to fork (ms, median (min–max))"
  ],
  ["nodeMs", "`node -e 0` in the same rounds (ms, median (min–max))"],
  ["timeoutMs", "`timeout 10 true` (GNU coreutils) in the same rounds (ms, median (min–max))"],
  ["rssKiB", "Peak RSS of `corral run -- true` (KiB, worst run)"],
  ["nodeRssKiB", "Peak RSS of `node -e 0` (KiB, worst run)"],
  ["bufferMicros", "The same read on a bare `OutputBuffer` (`readSince(0)`, `tail(50)`), without registry or tool, each sample the mean of 200 whole reads or 2000 tails after a full GC, as the lower bound's, timed inside one effect as the tool's calls are (µs, median (min–max))"]
]

const extraValue = (v) => (typeof v === "object" ? `${num(v.median)} (${num(v.min)}–${num(v.max)})` : num(v))

const extraTables = (results, impls) =>
  EXTRAS.flatMap(([key, title]) => {
    const withKey = results.filter((r) => impls.some((impl) => figureOf(r, impl)?.[key] !== undefined))
    const columns = impls.filter((impl) => withKey.some((r) => figureOf(r, impl)?.[key] !== undefined))
    if (withKey.length === 0) return []
    const rows = withKey.map((r) => [`\`${r.id}\``, ...columns.map((impl) => {
      const v = figureOf(r, impl)?.[key]
      return v === undefined ? "n/a" : extraValue(v)
    })])
    return [`${title}:`, "", table(["Scenario", ...columns.map((impl) => columnName(impl, withKey))], rows), ""]
  })

/** A partial run (--only, --impl) keeps older figures: say which ones are fresh. */
const freshness = (data) => {
  const older = data.results.filter((r) => r.measuredAt !== data.generatedAt)
  if (older.length === 0) return []
  const fresh = data.results.filter((r) => r.measuredAt === data.generatedAt).map((r) => `\`${r.id}\``)
  return [`This run measured ${fresh.join(", ") || "nothing"}; the other figures come from earlier runs (each result's \`measuredAt\` in \`latest.json\`).`, ""]
}

export const renderMarkdown = (data, { command, wallSeconds }) =>
  [
    "# Benchmarks",
    "",
    `Generated by \`${command}\` at ${data.generatedAt} in ${Math.round(wallSeconds)} s. Do not edit by hand: run the bench again to regenerate this page, its charts and \`bench/results/latest.json\`.`,
    "",
    ...freshness(data),
    `Machine: ${data.machine.cpu} (${data.machine.cpus} CPUs), ${data.machine.memoryGiB} GiB RAM, ${data.machine.os}, Node ${data.machine.node}; load average ${data.machine.loadAverage?.join(" / ") ?? "unknown"} (1 / 5 / 15 min) when the run began. Other work on the machine shows up as noise, mostly in the max.`,
    "",
    "Each cell is the median, then min–max, over the runs shown in `latest.json`. A peer that left processes alive is marked:",
    `\`⚠ N still alive at return\` (its stop returned while N processes of the workload were alive; they died within ${SETTLE_MS} ms),`,
    `\`⚠ left N alive\` (still alive ${SETTLE_MS} ms later), \`⏱ hung\` (did not return within grace + ${HANG_MARGIN_MS / 1000} s; the bench killed the workload to free it).`,
    "",
    "## Targets",
    "",
    table(["Scenario", "Target", "corral measured", "Verdict"], targetRows(data.results)),
    "",
    ...FAMILIES.flatMap((f) => familySection(f, withBackends(data.results))),
    "## How it is measured",
    "",
    "Every (scenario, implementation) batch runs in a worker process inside a PID namespace of its own (`unshare --pid --fork --mount-proc`), so nothing a run orphans can outlive the batch. A scenario with more than one implementation runs in rounds (three in a full run, one in `--quick`; `--rounds N` sets it): each round runs one batch of every implementation in turn, with an even share of the runs, the order reversed every other round, and each implementation's samples of all rounds make its figure. This shared machine's speed moves by 10-40% within minutes, and one batch per implementation measured each at a different minute ([ADR 30](adr/0030-bench-in-rounds.md)). Two kinds of PID 1:",
    "",
    "- **zombie-init**: the worker (Node) is PID 1 of the namespace. libuv waits only for children Node spawned itself, so every orphan that dies stays a zombie, as under Node-as-PID-1 containers and on the machines corral is developed on. The zombies of a batch's earlier runs stay in the table for its later runs, as they would under such an init.",
    "- **reaping**: bash is PID 1 and runs the worker as its child (`bash -c '\"$@\"; exit $?'`). While waiting for it bash calls `waitpid(-1)`, which reaps adopted orphans too; this was checked before choosing it over installing tini.",
    "",
    "A stop begins once the workload runs: every one of its processes is alive and each of its `sleep`s has exec'd (read as `comm` in `/proc`). A process that merely carries the run's marker may not run its command yet: corral's cgroup wrapper still joining its cell waits one RCU grace period there (6-8 ms on these machines, see README), and a stop begun then timed that join, not the stop. A stop's time runs from the stop call until the implementation's own promise or effect settles. Right after that, the bench reads `/proc` itself (not through corral) and counts live processes of the workload. In the `stop.*` scenarios that is every live process in the batch's namespace except the bench's own (the worker and PID 1) and, in the `busy1000` scenarios, the 1000 idle `sleep`s it started beforehand in a group and session of their own (killed when the batch ends, and in any case with its namespace): so a process that left the group and the session and dropped its environment (`stop.escaper`) or whose pid keeps changing (`stop.hopper`) still counts. Elsewhere it is the members of the workload's group or session, and any process carrying the run's `BENCH_MARKER` environment variable. Zombies count as gone. `clean` in `latest.json` means nothing was alive at that moment in any run. Each stop batch first stops one `sleep`, unmeasured, to warm up; the other batches start with an unmeasured round of their own. A stop that hangs is recorded once, not repeated.",
    "",
    "Registry batches load corral's registry and tools before measuring any implementation, so every spawn is measured from an equally large process. corral's registry keeps the default limits (16 shells, 256 KiB per buffer, 3 s grace) except in `stopall.200`, where the cap is raised to 200. `mem.idle-shell` runs each sample in a fresh worker process (in the batch's namespace) that has stopped nothing yet: a stop leaves garbage whose pages the allocator returns at unpredictable times, which made RSS shrink while shells were added. Each sample starts and keeps 16 unmeasured shells first, then reads RSS and the V8 heap after forced GCs, starts 16 shells (the registry's default cap; raised to 32 there for the warm-up shells) and reads them again. Sixteen warm-up shells, not one: V8 compiles a start path's code and allocates its feedback over its first dozen calls or so, and with a single warm-up shell that per-process cost was about half of corral's heap growth per shell (69 KiB against 35 KiB) and a third of the lower bound's. corral's registry starts one pattern worker (a thread, for `filter` and `waitFor`) at its first shell, a few MiB whatever the number of shells: before the first reading, a filtered read of a warm-up shell waits for that worker, which otherwise, when its start was slow, landed among the measured shells (RSS growth of 244 KiB per shell beside a heap growth of 71 KiB). Each sample process runs with `MALLOC_ARENA_MAX=1`: glibc otherwise gives every thread an arena of its own, and what V8's compiler and GC threads freed there during the measured starts stayed resident, 0 to 48 KiB per shell from one run to the next with the same heap growth (with `--single-threaded`, 0 to 8 KiB); with one arena that memory is reused, and V8 keeps its threads. RSS grows in whole pages, and V8's heap grows only when its committed pages are full, so over 16 shells RSS still moves in steps of 8 to 16 KiB per shell; the V8 heap table is the steadier figure. Ingest counts a registry shell's bytes once the shell has ended, from a read by a reader that never read before (what it gets plus what it missed).",
    "",
    "Implementations:",
    "",
    ...IMPL_ORDER.map((impl) => `- **${impl}**: ${IMPLS[impl]}`),
    ""
  ].join("\n")

export const renderHeadline = (data) => {
  const views = withBackends(data.results)
  const rows = HEADLINE.map((id) => views.find((r) => r.id === id)).filter(Boolean)
  const impls = implsOf(rows)
  return [
    table(["Scenario", ...impls.map((impl) => columnName(impl, rows))], rows.map((r) => [`\`${r.id}\``, ...impls.map((impl) => shortCell(r, impl))])),
    "",
    `Medians from \`bench/results/latest.json\` (${data.generatedAt}); "not run" was skipped by \`--quick\`, "n/a" does not apply. Details, ranges and charts in [docs/benchmarks.md](docs/benchmarks.md).`,
    ""
  ].join("\n")
}

export const writeReports = (root, data, meta) => {
  const chartDir = path.join(root, "docs", "bench")
  fs.mkdirSync(chartDir, { recursive: true })
  for (const r of withBackends(data.results)) {
    for (const { id, svg } of chartsFor(r)) fs.writeFileSync(path.join(chartDir, `${id}.svg`), svg)
  }
  fs.writeFileSync(path.join(root, "docs", "benchmarks.md"), renderMarkdown(data, meta))
  fs.writeFileSync(path.join(root, "bench", "results", "headline.md"), renderHeadline(data))
}
