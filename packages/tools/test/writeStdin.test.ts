/**
 * `write_stdin`: input to a background shell, control keys as a terminal
 * would deliver them, and what the shell printed in answer.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe.skipIf(!inPidNamespace)("write_stdin (needs the PID namespace of npm test)", () => {
  it.live("writes a line and returns what the shell printed in answer", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: `while read -r line; do echo "got: $line"; done`, run_in_background: true })
      const answer = okText(yield* call("write_stdin", { shell_id: "s1", text: "hello\n", wait_ms: 2000 }))
      expect(answer).toMatch(/^\[wrote 6 characters to shell s1's stdin\]\ngot: hello\n\[status: running, for/)
      // eof ends the loop, and the shell with it
      const closed = okText(yield* call("write_stdin", { shell_id: "s1", text: "last\n", eof: true, wait_ms: 2000 }))
      expect(closed).toMatch(/^\[wrote 5 characters to shell s1's stdin, then closed shell s1's stdin \(end of file\)\]\ngot: last\n/)
      const end = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 10_000 }))
      expect(end).toContain("[status: exited with code 0")
      expect(yield* call("write_stdin", { shell_id: "s1", text: "more\n" })).toMatchObject({
        ok: false,
        reason: "InvalidInput",
        text: expect.stringMatching(/^shell s1 takes no more input: its stdin was closed/)
      })
    })))

  // it returned only once the command had read every byte: a command that never reads held the call until the shell ended
  it.live("a command that does not read its input holds the call no longer than wait_ms: the rest, and the end of file, reach it in order as it reads", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: "echo started; sleep 2; wc -c", run_in_background: true })
      yield* call("bash_output", { shell_id: "s1", wait_for: "started" })
      const text = "x".repeat(300_000)
      const answer = okText(yield* call("write_stdin", { shell_id: "s1", text, eof: true, wait_ms: 300 }))
      expect(answer).toMatch(
        /^\[wrote 300000 characters to shell s1's stdin, then closed shell s1's stdin \(end of file\); the command has not read all of it yet: the rest waits in the pipe and goes to it, in order, as it reads\]\n/
      )
      const counted = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "^\\s*\\d+$", wait_timeout: 10_000 }))
      expect(counted).toMatch(/^300000\n/m)
      const end = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 10_000 }))
      expect(end).toContain("[status: exited with code 0")
    })))

  it.live("text for a command that does not read waits in the supervisor up to 1 MiB: more is refused until it reads, an end of file is not", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: "sleep 30", run_in_background: true })
      const first = okText(yield* call("write_stdin", { shell_id: "s1", text: "x".repeat(1_500_000), wait_ms: 0 }))
      expect(first).toContain("the command has not read all of it yet")
      const refused = yield* call("write_stdin", { shell_id: "s1", text: "more", wait_ms: 0 })
      expect(refused).toMatchObject({
        ok: false,
        reason: "InvalidInput",
        text: expect.stringMatching(
          /^shell s1 has not read the \d+ bytes written to its stdin before: it takes more text once it reads them\. See what it is doing with bash_output, or close its stdin with eof: true\./
        )
      })
      const closed = okText(yield* call("write_stdin", { shell_id: "s1", eof: true, wait_ms: 0 }))
      expect(closed).toMatch(/^\[closed shell s1's stdin \(end of file\); the command has not read all of it yet/)
      expect(okText(yield* call("kill_bash", { shell_id: "s1" }))).toMatch(/^Killed shell s1/)
    })))

  it.live("Ctrl-C alone is SIGINT to the shell's processes", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: `trap 'echo interrupted; exit 130' INT; echo waiting; while true; do sleep 0.1; done`, run_in_background: true })
      yield* call("bash_output", { shell_id: "s1", wait_for: "waiting" })
      const answer = okText(yield* call("write_stdin", { shell_id: "s1", text: "\u0003", wait_ms: 2000 }))
      expect(answer).toMatch(/^\[sent SIGINT to shell s1's process group \(Ctrl-C\)\]\ninterrupted\n/)
      const end = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 10_000 }))
      expect(end).toContain("[status: exited with code 130")
    })))

  it.live("bad input and other owners' shells are tool errors", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: "sleep 30", run_in_background: true })
      expect(yield* call("write_stdin", { shell_id: "s1" })).toMatchObject({
        ok: false,
        text: `give text to write (such as "yes\\n", or "\\u0003" for Ctrl-C), or eof: true to close stdin`
      })
      expect(yield* call("write_stdin", { shell_id: "s1", text: "x", wait_ms: 60_000 })).toMatchObject({ ok: false, reason: "InvalidInput" })
      expect(yield* call("write_stdin", { shell_id: "s9", text: "x" })).toMatchObject({ ok: false, reason: "UnknownShell" })
      expect(yield* call("write_stdin", { text: "x" })).toMatchObject({ ok: false, text: expect.stringContaining("shell_id is missing") })
      yield* call("kill_bash", { shell_id: "s1" })
    })))
})
