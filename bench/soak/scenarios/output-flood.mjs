// Gigabytes of output through a registry shell: memory stays at the buffer cap
// plus slack, and every byte is accounted for as retained or dropped.
import { ShellRegistry } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { awaitFinal, check, start, withRegistry } from "../lib/harness.mjs"

const MiB = 2 ** 20
const BUFFER_BYTES = 256 * 1024
// garbage awaiting collection: the 64 KiB pipe reads' buffers (V8 collects
// once about 64 MiB of external memory has been allocated since the last
// collection) and the young generation's own pages (two semi-spaces of up to
// 16 MiB each on 64-bit). Peaks measured here: 43-57 MiB idle, 65.9 MiB once
// under CI's load, over the 64 MiB this allowed when it counted the first alone
const SLACK_BYTES = (64 + 32) * MiB
// far slower than any machine this runs on, so only a hang fails on time
const SLOWEST_BYTES_PER_MS = 16 * MiB / 1000
// RSS before the first flood: memory a flood took and the allocator kept would hide a later flood's growth
let baseline

export default {
  id: "output-flood",
  summary: "head -c <size> /dev/zero through one shell",
  orphans: false,
  timeoutMs: 300_000,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const registry = yield* ShellRegistry
      globalThis.gc()
      baseline ??= process.memoryUsage.rss()
      yield* check(Kernel.resetPeakRss(), "cannot reset the peak RSS (/proc/self/clear_refs): the bound cannot be checked")
      const began = performance.now()
      const shell = yield* start(`exec head -c ${ctx.floodBytes} /dev/zero`)
      const info = yield* awaitFinal(shell, ctx.floodBytes / SLOWEST_BYTES_PER_MS)
      const seconds = (performance.now() - began) / 1000
      const growth = Kernel.peakRss() - baseline
      yield* check(info.status._tag === "Exited" && info.status.code === 0, `the flood ended as ${JSON.stringify(info.status)}`)
      const output = yield* registry.output(shell.id, { mode: "all" })
      const retained = Buffer.byteLength(output.text)
      yield* check(
        output.dropped + retained === ctx.floodBytes,
        `${output.dropped} dropped + ${retained} retained bytes != ${ctx.floodBytes} written`
      )
      yield* check(retained <= BUFFER_BYTES, `${retained} bytes retained, over the ${BUFFER_BYTES}-byte cap`)
      ctx.record("MiB/s", ctx.floodBytes / MiB / seconds)
      ctx.record("peak RSS growth MiB", growth / MiB)
      yield* check(
        growth <= BUFFER_BYTES + SLACK_BYTES,
        `RSS peaked ${(growth / MiB).toFixed(1)} MiB above its level before the first flood, over the buffer cap (256 KiB) + ${SLACK_BYTES / MiB} MiB slack`
      )
    }), { bufferBytes: BUFFER_BYTES })
}
