/**
 * `bash` with `tty: true` through the @effect/ai toolkit: a REPL on a
 * terminal answered with `write_stdin`, Ctrl-C to the foreground job,
 * a foreground command that checks for a terminal, and the output as text.
 */
import { describe, expect, it } from "@effect/vitest"
import { ShellRegistry } from "@corral/core/ShellRegistry"
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

  it.live("a terminal of the size asked for (120x40 unless told), which a resize through the registry changes", () =>
    withTools(Effect.gen(function*() {
      expect(okText(yield* call("bash", { command: "stty size", tty: true, cols: 100, rows: 30 }))).toMatch(/^30 100\n\[exited with code 0 after /)
      expect(okText(yield* call("bash", { command: "stty size", tty: true }))).toMatch(/^40 120\n\[exited with code 0 after /)
      // one `stty size` per line typed
      yield* call("bash", { command: "while read -r line; do stty size; done", run_in_background: true, tty: true, cols: 80, rows: 24 })
      expect(okText(yield* call("write_stdin", { shell_id: "s1", text: "\n", wait_ms: 2000 }))).toMatch(/^\[typed 1 character into shell s1's terminal\]\n\n24 80\n/)
      yield* (yield* ShellRegistry).resize("s1", { cols: 132, rows: 50 }, { owner: "test" })
      expect(okText(yield* call("write_stdin", { shell_id: "s1", text: "\n", wait_ms: 2000 }))).toMatch(/\n\n50 132\n/)
      okText(yield* call("kill_bash", { shell_id: "s1" }))
    })))

  it.live("cols and rows: with tty: true, whole numbers from 1 to 1000, each refused with what to fix", () =>
    withTools(Effect.gen(function*() {
      const refusals = [
        [{ command: "stty size", cols: 100 }, "cols sizes the terminal of tty: true: add tty: true, or drop cols"],
        [{ command: "stty size", tty: true, rows: 0 }, "rows must be a whole number from 1 to 1000; got 0"],
        [{ command: "stty size", tty: true, cols: 80.5 }, "cols must be a whole number from 1 to 1000; got 80.5"],
        [{ command: "stty size", tty: true, cols: 1001 }, "cols must be a whole number from 1 to 1000; got 1001"],
        [{ command: "stty size", tty: true, cols: "wide" }, `invalid arguments for bash: cols must be an integer; got "wide"`],
        [{ command: "stty size", tty: true, columns: 80 }, `unknown parameter "columns"`]
      ] as const
      for (const [params, message] of refusals) {
        const result = yield* call("bash", params)
        expect(result, JSON.stringify(params)).toMatchObject({ ok: false, reason: "InvalidInput", text: expect.stringContaining(message) })
      }
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
