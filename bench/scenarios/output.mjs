// output.read.*: µs to read a full 256 KiB output buffer.
//
// corral's figure is `bash_output` called through the `ShellTools` toolkit,
// as a model host calls it, on a registry shell whose buffer is full and has
// wrapped. Each sample also times the same read on a bare `OutputBuffer`
// (`readSince(0)`, `tail(50)`), so the registry's and the tool's share shows.
import { Buffer } from "node:buffer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { loadCorral } from "../lib/peers.mjs"
import { sleep } from "../lib/proc.mjs"
import { OWNER, openRegistry, toolCaller } from "../lib/registry.mjs"

const CAPACITY = 256 * 1024
const PIPE_CHUNK = 64 * 1024
/** Bare reads per sample: a tail is 500 times cheaper than a whole read, and 200 tails (4 ms) are short enough for one GC to move a sample. */
const ITERATIONS = { readAll: 200, tail50: 2000 }
/** A tool call costs more than a bare read: fewer per sample keep a sample short. */
const TOOL_ITERATIONS = 100

/** 1 MiB of log lines with some multi-byte characters, cut into pipe-sized chunks, so the ring has wrapped. */
const makeOutput = () => {
  const lines = []
  for (let i = 0, size = 0; size < 4 * CAPACITY; i++) {
    const line = `2025-01-01T00:00:${String(i % 60).padStart(2, "0")}Z info ✓ request ${i} served in ${i % 97} ms — café\n`
    lines.push(line)
    size += Buffer.byteLength(line)
  }
  const all = Buffer.from(lines.join(""))
  const chunks = []
  for (let at = 0; at < all.length; at += PIPE_CHUNK) chunks.push(all.subarray(at, at + PIPE_CHUNK))
  return { all, chunks }
}

const filledBuffer = async () => {
  const { Effect, OutputBuffer } = await loadCorral()
  const buffer = Effect.runSync(OutputBuffer.make(CAPACITY))
  for (const chunk of makeOutput().chunks) buffer.append("stdout", chunk)
  return { Effect, buffer }
}

/**
 * The bare buffer's reads, timed inside one effect as the tool's calls are
 * (see `timeCalls`): an `Effect.runSync` per read would time the bridge
 * into Effect (a fiber made and run, about 10 µs here), not the read.
 */
const bufferSamplers = {
  readAll: (buffer) => () => buffer.readSince(0),
  tail50: (buffer) => () => buffer.tail(50)
}

const bufferSampler = async (reader) => {
  const { Effect, buffer } = await filledBuffer()
  const read = bufferSamplers[reader](buffer)
  return (iterations) => {
    globalThis.gc?.()
    return Effect.runSync(Effect.gen(function*() {
      const began = performance.now()
      for (let i = 0; i < iterations; i++) yield* read()
      return ((performance.now() - began) * 1000) / iterations
    }))
  }
}

/**
 * A registry shell that has printed the whole output and sleeps on. Ready
 * once the last line is the tail of its buffer.
 */
const fullShell = async () => {
  const { all } = makeOutput()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-bench-output-"))
  const file = path.join(dir, "output.log")
  fs.writeFileSync(file, all)
  const open = await openRegistry({ crashSafety: true, tools: true })
  const { Effect } = open.m
  const text = all.toString("utf8")
  const lastLine = text.slice(text.lastIndexOf("\n", text.length - 2) + 1)
  try {
    const info = await open.run(open.registry.start({ command: `cat '${file}'; exec sleep 1000` }, { owner: OWNER }))
    for (const deadline = performance.now() + 10_000;;) {
      const { text: tail } = await open.run(open.registry.output(info.id, { mode: "tail", lines: 1 }))
      if (tail === lastLine) break
      if (performance.now() > deadline) throw new Error(`the shell's buffer did not fill in 10 s; its last line: ${JSON.stringify(tail)}`)
      await sleep(5)
    }
    return { open, Effect, id: info.id }
  } catch (error) {
    await open.close()
    throw error
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * One `bash_output` call per iteration, timed inside one effect so the cost
 * is the tool's, not the promise bridge's. The default mode returns what is
 * new to the caller, so each iteration is a caller that never read before
 * (handlers of an owner of its own, built before the clock starts).
 */
let readerCount = 0

const toolReaders = {
  readAll: async (shell) => async () => {
    const callers = []
    for (let i = 0; i < TOOL_ITERATIONS; i++) callers.push(await toolCaller(shell.open, `reader-${++readerCount}`))
    return timeCalls(shell, callers.map((call) => call({ shell_id: shell.id })))
  },
  tail50: async (shell) => {
    const call = await toolCaller(shell.open, "tail-reader")
    return async () => timeCalls(shell, Array.from({ length: TOOL_ITERATIONS }, () => call({ shell_id: shell.id, tail_lines: 50 })))
  }
}

const timeCalls = (shell, calls) =>
  shell.open.run(shell.Effect.gen(function*() {
    const began = performance.now()
    for (const call of calls) {
      const { isFailure, result } = yield* call
      if (isFailure || result.text.length < 1000) throw new Error(`bash_output returned too little: ${JSON.stringify(result).slice(0, 300)}`)
    }
    return ((performance.now() - began) * 1000) / calls.length
  }))

/** The floor: the retained bytes as one contiguous Buffer, decoded once. */
const retained = () => {
  const { all } = makeOutput()
  return all.subarray(all.length - CAPACITY)
}

const rawReaders = {
  readAll: async () => {
    const bytes = retained()
    return () => bytes.toString("utf8")
  },
  tail50: async () => {
    const bytes = retained()
    return () => {
      let at = bytes.length - 1
      for (let i = 0; i < 50 && at > 0; i++) at = bytes.lastIndexOf(10, at - 1)
      return bytes.subarray(at + 1).toString("utf8")
    }
  }
}

/**
 * µs per call of `read`, averaged over `iterations` calls, after a full GC
 * (as the bare buffer's: its sample follows a hundred tool calls in the same
 * process, whose garbage would otherwise be collected in it).
 */
const meanMicros = async (read, iterations) => {
  globalThis.gc?.()
  const began = performance.now()
  for (let i = 0; i < iterations; i++) {
    const text = read()
    if (typeof text?.then === "function") await text
  }
  return ((performance.now() - began) * 1000) / iterations
}

/** corral: the tool's µs per call as the value, the bare buffer's beside it. */
const corralSamples = async (reader, runs) => {
  const shell = await fullShell()
  try {
    const sampleTool = await toolReaders[reader](shell)
    const sampleBuffer = await bufferSampler(reader)
    // the tool's path is long: a few unmeasured samples let the JIT settle
    for (let i = 0; i < 3; i++) await sampleTool()
    sampleBuffer(ITERATIONS[reader])
    const samples = []
    for (let i = 0; i < runs; i++) {
      samples.push({ value: await sampleTool(), bufferMicros: sampleBuffer(ITERATIONS[reader]), clean: true })
    }
    return samples
  } finally {
    await shell.open.close()
  }
}

const rawSamples = async (reader, runs) => {
  const read = await rawReaders[reader]()
  await meanMicros(read, ITERATIONS[reader]) // warm-up
  const samples = []
  for (let i = 0; i < runs; i++) samples.push({ value: await meanMicros(read, ITERATIONS[reader]), clean: true })
  return samples
}

const readScenario = ({ id, reader, workload }) => ({
  id,
  suite: "registry",
  unit: "µs",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound"],
  runs: { quick: 5, full: 10 },
  extras: { bufferMicros: "range" },
  workload,
  run: async ({ impl, runs }) => ({ samples: await (impl === "corral" ? corralSamples : rawSamples)(reader, runs) })
})

export const scenarios = [
  readScenario({
    id: "output.read.256k",
    reader: "readAll",
    workload:
      "`bash_output` in its default mode (what is new) for a caller that has not read yet, on a registry shell whose 256 KiB buffer is full and has wrapped (1 MiB printed); the tool caps its text at 30000 characters"
  }),
  readScenario({
    id: "output.read.256k.tail50",
    reader: "tail50",
    workload: "`bash_output` with `tail_lines: 50` on the same shell"
  })
]
