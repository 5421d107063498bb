// A background grandchild keeps stdout open: the exit status must come from
// the leader's exit, not from the pipe closing 3 s later.
import { ShellRegistry } from "@corral/core"
import * as Effect from "effect/Effect"
import { check, failure, killConfirmed, start, withRegistry } from "../lib/harness.mjs"

const HOLD_MS = 3000
const BOUND_MS = 1000

export default {
  id: "pipe-holder",
  summary: "sh -c 'sleep 3 & echo x': exit status long before the pipe closes",
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const began = performance.now()
      const shell = yield* start(`sleep ${HOLD_MS / 1000} & echo x`)
      let info = yield* registry.info(shell.id)
      while (info.status._tag === "Running") {
        if (performance.now() - began > BOUND_MS) {
          return yield* failure(`no exit status ${BOUND_MS} ms after start: a held pipe is delaying it (holder lives ${HOLD_MS} ms)`)
        }
        yield* Effect.sleep(5)
        info = yield* registry.info(shell.id)
      }
      ctx.record("exit status ms", performance.now() - began)
      yield* check(
        info.status._tag === "Lingering" && info.status.exit._tag === "Exited" && info.status.exit.code === 0,
        `expected Lingering after exit 0 while the holder lives, got ${JSON.stringify(info.status)}`
      )
      const output = yield* registry.output(shell.id)
      yield* check(output.text === "x\n", `read ${JSON.stringify(output.text)} while the pipe was held, expected "x\\n"`)
      yield* killConfirmed(shell)
    }))
}
