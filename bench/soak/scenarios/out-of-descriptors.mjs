// A supervisor that has run out of file descriptors stops its shell all the
// same (ADR 31): `test/fixtures/stop-out-of-descriptors.mjs`, under
// `ulimit -n 256`, takes every descriptor left, then stops a TERM-ignoring
// command with a `setsid env -i` escaper. Nothing may be left, and a start
// tried meanwhile must fail saying which limit was reached.
import { execFile } from "node:child_process"
import * as Effect from "effect/Effect"
import { check, failure, markedToken, staysGone } from "../lib/harness.mjs"

const fixture = new URL("../../../test/fixtures/stop-out-of-descriptors.mjs", import.meta.url).pathname

const runFixture = (backend, token, command) =>
  Effect.async((resume) => {
    const child = execFile(
      "sh",
      ["-c", `ulimit -n 256 && exec "$0" "$@"`, process.execPath, fixture, backend, token, command],
      { timeout: 20_000 },
      (error, stdout, stderr) => {
        if (error) return resume(failure(`the fixture failed: ${error.message} ${stderr.trim()}`))
        try {
          resume(Effect.succeed(JSON.parse(stdout.trim().split("\n").at(-1))))
        } catch {
          resume(failure(`the fixture printed no result: ${stdout.trim()}`))
        }
      }
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

export default {
  id: "out-of-descriptors",
  summary: "a supervisor with every descriptor taken (ulimit -n 256) stops trap '' TERM; setsid env -i escaper; nothing left",
  orphans: true,
  run: (ctx) =>
    Effect.gen(function*() {
      const token = yield* markedToken(ctx)
      const command = `trap '' TERM; setsid env -i sh -c 'sleep 6${token}' & sleep 6${token} & wait`
      const result = yield* runFixture(ctx.backend ?? "auto", token, command)
      const { report } = result
      ctx.record("descriptors taken", result.held)
      ctx.record("stop ms", report.durationMs)
      yield* check(result.held > 100, `the fixture took only ${result.held} descriptors`)
      yield* check(
        report.escalated && report.survivors.length === 0 && result.aliveAtReturn.length === 0,
        `out of descriptors, the stop left processes: ${JSON.stringify(result)}`
      )
      yield* check(/EMFILE/.test(result.refused), `a start out of descriptors failed with: ${result.refused}`)
      yield* staysGone("after a stop out of descriptors", token)
    })
}
