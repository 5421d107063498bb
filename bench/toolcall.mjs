#!/usr/bin/env node
// A tool call's own cost: what the toolkit adds (parameter decode, result
// validation and encode, the notices) to the registry operation the tool
// performs, and one journal write. Each overhead is the median of a tool's
// calls minus the median of the same registry operation called directly, in
// the same run and process, alternating, so load on the machine hits both.
//
//   node bench/toolcall.mjs [--calls N]     (default 2000 of each)
import { parseArgs } from "node:util"
import { openRegistry, OWNER, toolCaller } from "./lib/registry.mjs"

const { values } = parseArgs({ options: { calls: { type: "string", default: "2000" } } })
const CALLS = Number(values.calls)
if (!(Number.isInteger(CALLS) && CALLS > 0)) {
  console.error(`bench/toolcall: --calls must be a positive integer, got "${values.calls}"`)
  process.exit(2)
}

const median = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const open = await openRegistry({ crashSafety: true, tools: true })
const { Effect, Journal } = open.m
try {
  const shells = []
  for (let i = 0; i < 4; i++) shells.push(await open.run(open.registry.start({ command: `seq 1 200; exec sleep 1000` }, { owner: OWNER })))
  const id = shells[0].id
  const time = (effect) => open.run(Effect.gen(function*() {
    const began = performance.now()
    yield* effect
    return performance.now() - began
  }))
  const pairs = [
    {
      name: "list_shells {}",
      tool: await toolCaller(open, OWNER, "list_shells"),
      params: {},
      direct: open.registry.list
    },
    {
      name: `bash_output {"shell_id","tail_lines":20}`,
      tool: await toolCaller(open, OWNER, "bash_output"),
      params: { shell_id: id, tail_lines: 20 },
      direct: open.registry.output(id, { mode: "tail", lines: 20 })
    },
    {
      name: `kill_bash {"shell_id":"s99"} (unknown id: a tool error)`,
      tool: await toolCaller(open, OWNER, "kill_bash"),
      params: { shell_id: "s99" },
      direct: Effect.either(open.registry.info("s99"))
    }
  ]
  const rows = []
  for (const pair of pairs) {
    const viaTool = []
    const direct = []
    for (let i = 0; i < CALLS; i++) {
      viaTool.push(await time(pair.tool(pair.params)))
      direct.push(await time(pair.direct))
    }
    rows.push({ call: pair.name, tool_ms: median(viaTool), direct_ms: median(direct), overhead_ms: median(viaTool) - median(direct) })
  }
  const supervisor = open.registry.supervisor
  const entry = {
    version: Journal.version,
    supervisor,
    shells: shells.map((s) => ({ id: s.id, tag: s.tag, pid: s.pid, leaderStartTime: null, bornAfter: 0, command: s.command, cwd: s.cwd, owner: s.owner, startedAt: s.startedAt }))
  }
  const writes = []
  for (let i = 0; i < Math.min(CALLS, 500); i++) writes.push(await time(Journal.write(open.registry.stateDir, entry)))
  rows.push({ call: "journal write (4 shells)", tool_ms: median(writes), direct_ms: 0, overhead_ms: median(writes) })
  const pad = (s, n) => String(s).padEnd(n)
  console.log(`${pad("call", 56)}${pad("tool ms", 10)}${pad("direct ms", 11)}overhead ms (median of ${CALLS})`)
  for (const r of rows) console.log(`${pad(r.call, 56)}${pad(r.tool_ms.toFixed(3), 10)}${pad(r.direct_ms.toFixed(3), 11)}${r.overhead_ms.toFixed(3)}`)
  const worst = Math.max(...rows.map((r) => r.overhead_ms))
  console.log(`\nlargest overhead ${worst.toFixed(3)} ms: ${worst <= 1 ? "within" : "OVER"} the 1 ms budget`)
  process.exitCode = worst <= 1 ? 0 : 1
} finally {
  await open.close()
}
