// Random bytes (invalid UTF-8, NULs), more than the buffer holds, read back
// every way the registry offers while they arrive and after.
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { ShellRegistry } from "@corral/core"
import * as Effect from "effect/Effect"
import { awaitFinal, check, start, withRegistry } from "../lib/harness.mjs"

const BUFFER_BYTES = 256 * 1024
const TRAILER = Buffer.from("ok \xff\xfe nul\x00here \xc3\nhalf \xe2\x82 then \xf0\x9f\x98\x80 end\n", "latin1")

export default {
  id: "invalid-utf8",
  summary: "1 MiB of random bytes plus invalid sequences and NULs, read back all ways",
  orphans: false,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const file = path.join(ctx.stateDir, "bytes")
      const bytes = Buffer.concat([randomBytes(4 * BUFFER_BYTES), TRAILER])
      fs.writeFileSync(file, bytes)
      const shell = yield* start(["sh", "-c", 'head -c 600000 "$0"; sleep 0.05; tail -c +600001 "$0"', file])
      const reads = [
        { mode: "new" },
        { mode: "tail", lines: 3 },
        { mode: "all", filter: "nul" },
        { mode: "new", reader: "second", filter: "[\\x00-\\x1f]" },
        { mode: "new", reader: "third", waitFor: "\\uFFFD|end", waitMs: 50 }
      ]
      const readAll = Effect.forEach(reads, (options) => registry.output(shell.id, options))
      // while the output arrives, then once it is complete
      yield* readAll
      yield* awaitFinal(shell)
      const results = yield* readAll
      yield* check(results.every((r) => typeof r.text === "string"), "a read returned no text")
      const all = yield* registry.output(shell.id, { mode: "all" })
      const expected = bytes.subarray(all.dropped).toString("utf8")
      yield* check(all.text === expected, `the retained text differs from the bytes written after offset ${all.dropped}`)
      yield* check(all.text.endsWith(TRAILER.toString("utf8")) && all.text.includes("\u0000here"), "the trailer with its NUL did not survive")
      const tail = yield* registry.output(shell.id, { mode: "tail", lines: 1 })
      const lastLine = TRAILER.toString("utf8").split("\n").at(-2) + "\n"
      yield* check(tail.text === lastLine, `tail 1 gave ${JSON.stringify(tail.text)}, expected ${JSON.stringify(lastLine)}`)
    }), { bufferBytes: BUFFER_BYTES })
}
