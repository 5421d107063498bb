/**
 * `bash` with `tty: true` through the @effect/ai toolkit: a REPL on a
 * terminal answered with `write_stdin`, Ctrl-C to the foreground job,
 * a foreground command that checks for a terminal, and the output as text.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe.skipIf(!inPidNamespace)("bash tty: true (needs the PID namespace of npm test)", () => {
  it.live("a Python REPL on a terminal, answered with write_stdin: echoed input, its answer, the prompt, as plain lines", () =>
    withTools(Effect.gen(function*() {
      const started = yield* call("bash", { command: "python3 -i -q", run_in_background: true, tty: true, description: "A Python REPL" })
      expect(okText(started)).toMatch(/^Started background shell s1 \(pid \d+\): python3 -i -q\n/)
      expect(started.ok && started.metadata.tty).toBe(true)
      yield* call("bash_output", { shell_id: "s1", wait_for: ">>> ", wait_timeout: 15_000 })
      const answer = okText(yield* call("write_stdin", { shell_id: "s1", text: "sum(range(10))\n", wait_ms: 3000 }))
      expect(answer).toMatch(/^\[typed 15 characters into shell s1's terminal\]\nsum\(range\(10\)\)\n45\n>>> \n\[status: running, for /)
      expect(answer).not.toMatch(/[\r\u001b]/)
      const end = okText(yield* call("write_stdin", { shell_id: "s1", eof: true, wait_ms: 3000 }))
      expect(end).toMatch(/^\[Ctrl-D \(end of file at the start of a line\)\]\n/)
      const status = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 10_000 }))
      expect(status).toContain("[status: exited with code 0")
    })))

  it.live("Ctrl-C interrupts the foreground job of an interactive bash, which reads on", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: "PS1='$ ' bash --norc --noprofile -i", run_in_background: true, tty: true })
      yield* call("bash_output", { shell_id: "s1", wait_for: "\\$ $", wait_timeout: 15_000 })
      yield* call("write_stdin", { shell_id: "s1", text: "sleep 300; echo not interrupted\n", wait_ms: 500 })
      const interrupted = okText(yield* call("write_stdin", { shell_id: "s1", text: "\u0003", wait_ms: 1000 }))
      expect(interrupted).toMatch(/^\[typed Ctrl-C into shell s1's terminal\]\n/)
      const after = okText(yield* call("write_stdin", { shell_id: "s1", text: "echo status=$?\n", wait_ms: 2000 }))
      expect(after).toMatch(/status=130\n/)
      expect(after).not.toContain("not interrupted")
      expect(after).toContain("[status: running")
      expect(okText(yield* call("kill_bash", { shell_id: "s1" }))).toMatch(/^Killed shell s1/)
    })))

  it.live("a foreground command on a terminal sees one, and its output comes back as lines", () =>
    withTools(Effect.gen(function*() {
      const text = okText(yield* call("bash", { command: "test -t 0 && test -t 1 && echo on a terminal; printf 'red \\033[31mtext\\033[0m\\n'", tty: true }))
      expect(text).toMatch(/^on a terminal\nred text\n\[exited with code 0 after /)
      const piped = okText(yield* call("bash", { command: "test -t 1 && echo on a terminal || echo on a pipe" }))
      expect(piped).toMatch(/^on a pipe\n/)
    })))

  it.live("tty must be a boolean", () =>
    withTools(Effect.gen(function*() {
      expect(yield* call("bash", { command: "python3", tty: "yes" })).toMatchObject({
        ok: false,
        reason: "InvalidInput",
        text: expect.stringContaining(`tty must be a boolean; got "yes"`)
      })
    })))
})
