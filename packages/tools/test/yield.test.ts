/**
 * `bash` with `yield_ms`: a command that ends in time answers as a foreground
 * one; one that does not goes on as a background shell, with nothing lost.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe.skipIf(!inPidNamespace)("bash yield_ms (needs the PID namespace of npm test)", () => {
  it.live("a command that ends within yield_ms answers with its output and exit status, and no notice follows", () =>
    withTools(Effect.gen(function*() {
      const result = yield* call("bash", { command: "echo quick; exit 4", yield_ms: 20_000 })
      expect(okText(result)).toMatch(/^quick\n\[exited with code 4 after [\d.]+m?s\]$/)
      expect(result.ok && result.metadata).toMatchObject({ exit_code: 4, yielded: false, state: "Exited" })
      const next = yield* call("bash", { command: "true" })
      expect(next.ok && next.metadata.notices).toBeUndefined()
    })))

  it.live("one that outlives it returns the output so far and goes on as a background shell", () =>
    withTools(Effect.gen(function*() {
      const result = yield* call("bash", { command: "echo first; sleep 1; echo second; exit 2", yield_ms: 300 })
      expect(okText(result)).toMatch(
        /^Still running after 300ms \(yield_ms\): it goes on as background shell s1 \(pid \d+\), under the shell limits \(stopped after 1h0m\)\.\nOutput so far:\nfirst\n\[status: running, for/
      )
      expect(result.ok && result.metadata).toMatchObject({ shell_id: "s1", yielded: true, state: "Running" })
      // it was not restarted: the rest of its output follows the first, and its real exit status
      const rest = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 20_000 }))
      expect(rest).toMatch(/^first\nsecond\n\[wait_for \/never\/: the shell ended after .*\]\n\[status: exited with code 2 after/)
    })))

  it.live("refuses a yield_ms out of bounds, or beside run_in_background", () =>
    withTools(Effect.gen(function*() {
      expect(yield* call("bash", { command: "true", yield_ms: 0 })).toMatchObject({
        ok: false,
        text: "yield_ms must be a whole number of milliseconds from 1 to 600000; got 0. It is how long to wait before the command goes on in the background."
      })
      expect(yield* call("bash", { command: "true", yield_ms: 100, run_in_background: true })).toMatchObject({
        ok: false,
        text: "yield_ms applies to a foreground command, and run_in_background returns at once: pass one of them"
      })
    })))
})
