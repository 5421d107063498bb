#!/usr/bin/env node
// CorralCommandExecutor against the stock NodeCommandExecutor, in one run,
// the same Command programs through each layer, alternating run by run:
//
//   npm run bench:executor [-- --runs N]
//
// Runs itself inside a PID namespace (scripts/in-pidns.mjs), so what stock
// leaves behind is reaped when the run ends. Prints a table and writes it to
// docs/bench/executor.md; every figure there is a ratio against stock measured
// in the same run, or a count.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"

const ROOT = fileURLToPath(new URL("..", import.meta.url))

if (process.env.CORRAL_TEST_PIDNS !== "1") {
  const r = spawnSync("node", [path.join(ROOT, "scripts", "in-pidns.mjs"), process.execPath, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: "inherit" })
  process.exit(r.status ?? 1)
}

const { values } = parseArgs({ options: { runs: { type: "string", default: "30" } } })
const runs = Number(values.runs)
if (!(Number.isInteger(runs) && runs > 0)) {
  console.error(`bench:executor: --runs must be a positive integer, got "${values.runs}"`)
  process.exit(2)
}

const { Command } = await import("@effect/platform")
const { Duration, Effect, Layer, ManagedRuntime, Stream } = await import("effect")
const NodeCommandExecutor = await import("@effect/platform-node/NodeCommandExecutor")
const NodeFileSystem = await import("@effect/platform-node/NodeFileSystem")
const { Containment, CorralCommandExecutor, Limits, ProcessTable } = await import("@corral/core")

const GRACE_MS = 500
const HANG_MS = 2_000
const layers = {
  corral: CorralCommandExecutor.layer.pipe(
    Layer.provide(Containment.layer().pipe(Layer.provideMerge(Layer.merge(ProcessTable.layer, Limits.layerWith({ grace: Duration.millis(GRACE_MS) })))))
  ),
  stock: NodeCommandExecutor.layer.pipe(Layer.provide(NodeFileSystem.layer))
}
const runtimes = Object.fromEntries(Object.entries(layers).map(([name, layer]) => [name, ManagedRuntime.make(layer)]))

const marked = (mark) =>
  fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n)).filter((pid) => {
    try {
      const state = fs.readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.[0]
      return state !== "Z" && fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(`CORRAL_BENCH_MARK=${mark}`)
    } catch {
      return false
    }
  }).map(Number)

let markCount = 0
const markedCommand = (script) => {
  const mark = `${process.pid}-${markCount++}`
  return { mark, command: Command.make("sh", "-c", script).pipe(Command.env({ CORRAL_BENCH_MARK: mark })) }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** One timed run: `program` through `impl`'s layer, then what is still alive with the run's mark. */
const timed = async (impl, make) => {
  const { mark, program } = make()
  const began = performance.now()
  const outcome = await runtimes[impl].runPromise(Effect.timeout(Effect.disconnect(program), Duration.millis(HANG_MS))).then(
    (value) => ({ value }),
    (error) => ({ error })
  )
  const ms = performance.now() - began
  const left = mark === undefined ? [] : marked(mark)
  for (const pid of left) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone since it was listed
    }
  }
  return { ms, hung: outcome.error !== undefined, left: left.length, value: outcome.value }
}

const scenarios = [
  {
    id: "string.echo",
    what: "`Command.string(Command.make(\"echo\", \"hello\"))`: start, read all output, stop",
    make: () => ({ program: Command.string(Command.make("echo", "hello")) })
  },
  {
    id: "exitCode.leaves-child",
    what: "`Command.exitCode` of `sleep 30 >/dev/null & exit 0`: the leader exits 0 and leaves a child",
    make: () => {
      const { mark, command } = markedCommand("sleep 30 >/dev/null 2>&1 & exit 0")
      return { mark, program: Command.exitCode(command) }
    }
  },
  {
    id: "kill.term-ignoring",
    what: `\`process.kill()\` of \`trap '' TERM; sleep 30 & while :; do sleep 1; done\` (corral's grace ${GRACE_MS} ms; a run over ${HANG_MS} ms counts as hung)`,
    make: () => {
      const { mark, command } = markedCommand("trap '' TERM; sleep 30 & while :; do sleep 1; done")
      return {
        mark,
        program: Effect.scoped(Effect.gen(function*() {
          const p = yield* Command.start(command)
          yield* Effect.sleep(Duration.millis(50))
          yield* p.kill()
        }))
      }
    }
  },
  {
    id: "stream.64mib",
    what: "`Command.stream` of `head -c 64MiB /dev/zero`, drained: MiB/s",
    throughput: 64,
    make: () => ({ program: Stream.runDrain(Command.stream(Command.make("head", "-c", String(64 * 1024 * 1024), "/dev/zero"))) })
  }
]

const results = []
for (const scenario of scenarios) {
  const samples = { corral: [], stock: [] }
  // one warm-up each, then alternate so load drifts hit both alike
  for (const impl of ["corral", "stock"]) await timed(impl, scenario.make)
  const n = scenario.id === "kill.term-ignoring" ? Math.min(runs, 10) : runs
  for (let i = 0; i < n; i++) for (const impl of ["corral", "stock"]) samples[impl].push(await timed(impl, scenario.make))
  const summary = Object.fromEntries(Object.entries(samples).map(([impl, xs]) => [impl, {
    ms: median(xs.map((x) => x.ms)),
    hung: xs.filter((x) => x.hung).length,
    left: xs.reduce((n, x) => n + x.left, 0),
    runs: xs.length
  }]))
  results.push({ scenario, summary })
  const show = (s) => scenario.throughput ? `${(scenario.throughput / (s.ms / 1000)).toFixed(0)} MiB/s` : `${s.ms.toFixed(2)} ms`
  console.log(`${scenario.id}: corral ${show(summary.corral)}, stock ${show(summary.stock)}`)
}

for (const rt of Object.values(runtimes)) await rt.dispose()

const cell = (scenario, s) => {
  const figure = scenario.throughput ? `${(scenario.throughput / (s.ms / 1000)).toFixed(0)} MiB/s` : `${s.ms < 10 ? s.ms.toFixed(2) : s.ms.toFixed(0)} ms`
  const notes = [
    s.hung > 0 ? `⏱ ${s.hung}/${s.runs} hung` : "",
    s.left > 0 ? `⚠ left ${s.left} alive in ${s.runs} runs` : ""
  ].filter(Boolean)
  return [figure, ...notes].join(" ")
}
const ratio = ({ scenario, summary }) =>
  scenario.throughput ? (summary.stock.ms / summary.corral.ms).toFixed(2) : (summary.corral.ms / summary.stock.ms).toFixed(2)

const table = [
  "| Scenario | corral | stock NodeCommandExecutor | corral / stock |",
  "|---|---|---|---|",
  ...results.map((r) => `| \`${r.scenario.id}\` | ${cell(r.scenario, r.summary.corral)} | ${cell(r.scenario, r.summary.stock)} | ${ratio(r)}x |`)
].join("\n")

const doc = `# CorralCommandExecutor against NodeCommandExecutor

Generated by \`npm run bench:executor\` (${new Date().toISOString()}, ${os.cpus().length} CPUs, Node ${process.version}, containment auto: cgroup where it works); medians of ${runs} runs (10 for \`kill.term-ignoring\`), the two alternating, in one PID namespace. "corral / stock" is time against time (for \`stream.64mib\`, throughput against throughput: above 1 is slower for time, faster for throughput). "⏱" marks runs that had not returned after ${HANG_MS} ms, "⚠" processes of the command still alive after it returned (killed by the bench).

${table}

Scenarios:
${results.map((r) => `- \`${r.scenario.id}\`: ${r.scenario.what}`).join("\n")}
`
fs.mkdirSync(path.join(ROOT, "docs", "bench"), { recursive: true })
fs.writeFileSync(path.join(ROOT, "docs", "bench", "executor.md"), doc)
console.log(`\n${table}\n\nwrote docs/bench/executor.md`)
