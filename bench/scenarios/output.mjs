// output.read.*: µs to read a full 256 KiB output buffer.
//
// Each implementation is a factory that fills its buffer with the same output
// and returns a `read()` (sync or async). corral's readers call the
// OutputBuffer directly for now; when the registry's `bash_output` lands, swap
// `corralReaders` for readers that go through it: nothing else changes.
import { Buffer } from "node:buffer"
import { loadCorral } from "../lib/peers.mjs"

const CAPACITY = 256 * 1024
const PIPE_CHUNK = 64 * 1024
const ITERATIONS = 200

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

export const corralReaders = {
  readAll: async () => {
    const { Effect, buffer } = await filledBuffer()
    return () => Effect.runSync(buffer.readSince(0)).text
  },
  tail50: async () => {
    const { Effect, buffer } = await filledBuffer()
    return () => Effect.runSync(buffer.tail(50)).text
  }
}

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

const meanMicros = async (read) => {
  const began = performance.now()
  for (let i = 0; i < ITERATIONS; i++) {
    const text = read()
    if (typeof text?.then === "function") await text
  }
  return ((performance.now() - began) * 1000) / ITERATIONS
}

const readScenario = ({ id, reader, workload }) => ({
  id,
  suite: "registry",
  unit: "µs",
  better: "lower",
  pid1: "reaping",
  impls: ["corral", "lower-bound"],
  runs: { quick: 5, full: 10 },
  workload,
  run: async ({ impl, runs }) => {
    const read = await (impl === "corral" ? corralReaders : rawReaders)[reader]()
    await meanMicros(read) // warm-up
    const samples = []
    for (let i = 0; i < runs; i++) samples.push({ value: await meanMicros(read), clean: true })
    return { samples }
  }
})

export const scenarios = [
  readScenario({ id: "output.read.256k", reader: "readAll", workload: "everything retained in a full, wrapped 256 KiB buffer (`readSince(0)`)" }),
  readScenario({ id: "output.read.256k.tail50", reader: "tail50", workload: "the last 50 lines of the same buffer (`tail(50)`)" })
]
