// start.cli, start.mcp: what the `corral` bin costs to start, next to what
// it stands in for, measured in the same batch and interleaved, so a busy
// machine slows every command of a round alike.
//
// - start.cli: `corral run -- true` (the bin as installed: its sh launcher,
//   then node), beside `timeout 10 true` and `node -e 0`. Wall time from
//   spawn to exit; peak RSS of the bin's process, read by GNU time(1) in
//   runs of their own, so time(1) costs the wall figures nothing.
// - start.mcp: `corral mcp` from spawn until its answer to `initialize` is
//   read, beside `node -e 0`'s spawn to exit.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

// BENCH_CORRAL_BIN measures another checkout's bin (a before and after)
const BIN = process.env.BENCH_CORRAL_BIN ?? fileURLToPath(new URL("../../packages/cli/bin/corral.js", import.meta.url))
const GNU_TIME = "/usr/bin/time"

/** ms from spawn to exit; a run that fails is an error, not a fast sample. */
const wallMs = (argv) => {
  const began = performance.now()
  const r = spawnSync(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] })
  const ms = performance.now() - began
  if (r.status !== 0) throw new Error(`${argv.join(" ")}: exit ${r.status ?? r.signal}: ${r.stderr}`)
  return ms
}

/** Peak RSS in KiB of `argv`'s process (the largest of it and what it waited for), or undefined without GNU time. */
const peakRssKiB = (argv) => {
  if (!fs.existsSync(GNU_TIME)) return undefined
  const r = spawnSync(GNU_TIME, ["-f", "%M", ...argv], { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" })
  const kib = Number(r.stderr.trim().split("\n").at(-1))
  if (r.status !== 0 || !Number.isFinite(kib)) throw new Error(`${GNU_TIME} ${argv.join(" ")}: exit ${r.status}: ${r.stderr}`)
  return kib
}

const NODE = [process.execPath, "-e", "0"]

const cliSamples = (runs) => {
  const corral = [BIN, "run", "--", "true"]
  const samples = []
  for (let i = -2; i < runs; i++) {
    const sample = {
      nodeMs: wallMs(NODE),
      timeoutMs: wallMs(["timeout", "10", "true"]),
      value: wallMs(corral),
      rssKiB: peakRssKiB(corral),
      nodeRssKiB: peakRssKiB(NODE),
      clean: true
    }
    if (i >= 0) samples.push(sample)
  }
  return samples
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "0" } }
})

/** ms from spawning `corral mcp` until its answer to `initialize` is read; then its stdin is closed and its exit awaited. */
const mcpInitializeMs = () =>
  new Promise((resolve, reject) => {
    const began = performance.now()
    const child = spawn(BIN, ["mcp"], { stdio: ["pipe", "pipe", "pipe"] })
    let out = ""
    let err = ""
    let answeredMs
    child.stdin.write(`${INITIALIZE}\n`)
    child.stdout.on("data", (chunk) => {
      out += chunk
      if (answeredMs !== undefined || !out.includes("\n")) return
      answeredMs = performance.now() - began
      // a closed stdin ends the server
      child.stdin.end()
    })
    child.stderr.on("data", (chunk) => (err += chunk))
    child.on("error", reject)
    child.on("close", (code) => {
      if (answeredMs === undefined || !out.includes("serverInfo")) reject(new Error(`corral mcp answered no initialize (exit ${code}): ${out}${err}`))
      else resolve(answeredMs)
    })
  })

const mcpSamples = async (runs) => {
  const samples = []
  for (let i = -2; i < runs; i++) {
    const sample = { nodeMs: wallMs(NODE), value: await mcpInitializeMs(), clean: true }
    if (i >= 0) samples.push(sample)
  }
  return samples
}

export const scenarios = [
  {
    id: "start.cli",
    suite: "start",
    unit: "ms",
    better: "lower",
    pid1: "reaping",
    impls: ["corral"],
    runs: { quick: 10, full: 30 },
    extras: { nodeMs: "range", timeoutMs: "range", rssKiB: "max", nodeRssKiB: "max" },
    workload: "`corral run -- true` through the bin (sh launcher, then node), spawn to exit; `timeout 10 true` and `node -e 0` in the same rounds",
    run: async ({ runs }) => ({ samples: cliSamples(runs) })
  },
  {
    id: "start.mcp",
    suite: "start",
    unit: "ms",
    better: "lower",
    pid1: "reaping",
    impls: ["corral"],
    runs: { quick: 10, full: 20 },
    extras: { nodeMs: "range" },
    workload: "`corral mcp` through the bin, from spawn until its answer to `initialize` is read (stdin holds the request at once); `node -e 0` in the same rounds",
    run: async ({ runs }) => ({ samples: await mcpSamples(runs) })
  }
]
