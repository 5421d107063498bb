/**
 * `corral mcp` as an agent uses it interactively, through the official MCP
 * SDK client: a dev server waited for, a finished shell's notice, input to a
 * shell on a pipe and to a REPL on a terminal (`tty: true`), Ctrl-C through
 * the terminal, a stop of a terminal's shell, and `tty: true` where the pty
 * package is not installed.
 *
 * The first test is the session the README shows: with CORRAL_README_SESSION
 * set to a file, it writes its transcript there.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { inPidNamespace } from "../packages/tools/test/helpers.js"
import type { CallResult, McpProcess } from "./fixtures/mcpHarness.js"
import { attachOnTerminal } from "./fixtures/attachTerminal.js"
import { eventually, mcpServer } from "./fixtures/mcpHarness.js"

const repo = fileURLToPath(new URL("..", import.meta.url))

/** Calls a tool and keeps the exchange, as the README prints it. */
const recorder = (server: McpProcess) => {
  const lines: Array<string> = []
  const call = (name: string, args: Record<string, unknown>) =>
    Effect.map(server.call(name, args), (result: CallResult) => {
      lines.push(`>>> ${name} ${JSON.stringify(args)}`, `<<< ${result.text}`, "")
      return result
    })
  return { call, transcript: () => lines.join("\n") }
}

/** The bin and its bundle copied outside the checkout: no node_modules above it holds a pty package. */
const binElsewhere = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-elsewhere-"))
    for (const part of ["bin", "bundle", "package.json"]) {
      fs.cpSync(path.join(repo, "packages", "cli", part), path.join(dir, "cli", part), { recursive: true })
    }
    return { dir, bin: path.join(dir, "cli", "bin", "corral.js") }
  }),
  ({ dir }) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

describe.skipIf(!inPidNamespace)("corral mcp, interactive (needs the PID namespace of npm test)", () => {
  it.scopedLive("the README session: a dev server waited for, a finished shell's notice, a Python REPL on a terminal, Ctrl-C", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--cwd", repo])
      const { call, transcript } = recorder(server)
      yield* call("bash", { command: "node test/fixtures/mcpDevServer.mjs 1500", run_in_background: true, description: "Start the dev server" })
      const ready = yield* call("bash_output", { shell_id: "s1", wait_for: "ready on", wait_timeout: 20_000 })
      expect(ready.text).toMatch(/\nready on http:\/\/127\.0\.0\.1:\d+\n\[wait_for \/ready on\/: a new line matched after [\d.]+m?s\]\n\[status: running/)

      yield* call("bash", { command: "sleep 1; echo 3 tests, 1 failed; exit 1", run_in_background: true, description: "Run the tests" })
      // the tests end meanwhile: their notice rides on the next result
      yield* Effect.sleep("2 seconds")
      const repl = yield* call("bash", { command: "python3 -q", run_in_background: true, tty: true, description: "A Python REPL" })
      expect(repl.text).toMatch(/^Started background shell s3 \(pid \d+\): python3 -q\n/)
      expect(repl.text).toMatch(/\n\[notice: shell s2 \(sleep 1; echo 3 tests, 1 failed; exit 1\) exited with code 1 after [\d.]+s; finished: the group is empty; 1 line unread\]$/)
      expect(repl.meta).toMatchObject({ tty: true, notices: [{ shell_id: "s2", exit_code: 1 }] })

      const prompt = yield* call("bash_output", { shell_id: "s3", wait_for: ">>> ", wait_timeout: 20_000 })
      expect(prompt.text).toMatch(/^>>> \n\[wait_for \/>>> \/: a new line matched after /)
      const answer = yield* call("write_stdin", { shell_id: "s3", text: "sum(range(10))\n", wait_ms: 3000 })
      expect(answer.isError).toBe(false)
      expect(answer.text).toMatch(/^\[typed 15 characters into shell s3's terminal\]\nsum\(range\(10\)\)\n45\n>>> \n\[status: running/)
      yield* call("write_stdin", { shell_id: "s3", text: "import time; time.sleep(600)\n", wait_ms: 1000 })
      const interrupted = yield* call("write_stdin", { shell_id: "s3", text: "\u0003", wait_ms: 2000 })
      expect(interrupted.text).toMatch(/^\[typed Ctrl-C into shell s3's terminal\]\n[^]*KeyboardInterrupt\n>>> \n\[status: running/)
      // (CPython reports an exit by SIGINT once its REPL has caught a Ctrl-C: the REPL is stopped, as the dev server is)
      const repl3 = yield* call("kill_bash", { shell_id: "s3" })
      expect(repl3.text).toMatch(/^Killed shell s3 \(python3 -q\): stopped \d process(es)? in \d+m?s: SIGTERM sufficed\./)
      const killed = yield* call("kill_bash", { shell_id: "s1" })
      expect(killed.text).toMatch(/^Killed shell s1 \(node test\/fixtures\/mcpDevServer\.mjs 1500\): stopped \d processes in \d+m?s: SIGTERM sufficed\./)
      expect(server.leftovers()).toEqual([])
      const file = process.env.CORRAL_README_SESSION
      if (file !== undefined && file !== "") fs.writeFileSync(file, transcript())
    }))

  it.scopedLive("write_stdin to a shell on a pipe: a line, Ctrl-C as SIGINT to its group, then end of file", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      yield* server.call("bash", { command: `trap 'echo interrupted' INT; while :; do if read -r line; then echo "got: $line"; elif [ $? -gt 128 ]; then continue; else break; fi; done; echo "stdin ended"`, run_in_background: true })
      const line = yield* server.call("write_stdin", { shell_id: "s1", text: "hello\n", wait_ms: 2000 })
      expect(line.text).toMatch(/^\[wrote 6 characters to shell s1's stdin\]\ngot: hello\n\[status: running/)
      const interrupted = yield* server.call("write_stdin", { shell_id: "s1", text: "\u0003", wait_ms: 2000 })
      expect(interrupted.text).toMatch(/^\[sent SIGINT to shell s1's process group \(Ctrl-C\)\]\ninterrupted\n/)
      const closed = yield* server.call("write_stdin", { shell_id: "s1", text: "\u0004", wait_ms: 2000 })
      expect(closed.text).toMatch(/^\[closed shell s1's stdin \(end of file\)\]\nstdin ended\n\[status: exited with code 0/)
      const again = yield* server.call("write_stdin", { shell_id: "s1", text: "more\n" })
      expect(again.isError).toBe(true)
      expect(again.text).toMatch(/^shell s1 takes no more input/)
      expect(server.leftovers()).toEqual([])
    }))

  it.scopedLive("kill_bash of a shell on a terminal stops all it started: a setsid escaper and a job that ignores SIGHUP and SIGTERM", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "300ms"])
      yield* server.call("bash", {
        command: `setsid sleep 301 & (trap '' HUP TERM; sleep 302) & echo started; wait`,
        run_in_background: true,
        tty: true
      })
      yield* server.call("bash_output", { shell_id: "s1", wait_for: "started" })
      const killed = yield* server.call("kill_bash", { shell_id: "s1" })
      expect(killed.text).toMatch(/^Killed shell s1 \(.*\): stopped \d processes in \d+m?s: it escalated to SIGKILL/)
      expect(server.leftovers()).toEqual([])
    }))

  it.scopedLive("a terminal of the size bash asked for, which corral attach resizes to its own terminal's, at once and on SIGWINCH", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const { tools } = yield* Effect.promise(() => server.client.listTools())
      const bash = tools.find((t) => t.name === "bash")!.inputSchema
      expect(bash).toMatchObject({
        additionalProperties: false,
        properties: { cols: { type: "integer", minimum: 1, maximum: 1000 }, rows: { type: "integer", minimum: 1, maximum: 1000 } }
      })
      const once = yield* server.call("bash", { command: "stty size", tty: true, cols: 100, rows: 30 })
      expect(once.text).toMatch(/^30 100\n\[exited with code 0 after /)
      const refused = yield* server.call("bash", { command: "stty size", cols: 100 })
      expect({ isError: refused.isError, text: refused.text }).toEqual({ isError: true, text: "cols sizes the terminal of tty: true: add tty: true, or drop cols" })

      // one `stty size` per line typed
      yield* server.call("bash", { command: "while read -r line; do stty size; done", run_in_background: true, tty: true, cols: 80, rows: 24 })
      /** Types Enter until the shell's answer is `expected`: a resize lands a moment after it was asked for. */
      const size = (expected: string) =>
        Effect.gen(function*() {
          let last = ""
          for (let i = 0; i < 20; i++) {
            last = (yield* server.call("write_stdin", { shell_id: "s1", text: "\n", wait_ms: 500 })).text
            expect(last).toMatch(/^\[typed 1 character into shell s1's terminal\]\n\n\d+ \d+\n/)
            if (last.includes(`\n${expected}\n`)) return
          }
          expect(last, `stty size never said ${expected}`).toContain(`\n${expected}\n`)
        })
      yield* size("24 80")
      const attached = yield* attachOnTerminal(server.stateDir, `${server.pid}:s1`, { cols: 90, rows: 25 })
      yield* size("25 90")
      // SIGWINCH to corral attach, from its own terminal's resize
      attached.term.resize(110, 35)
      yield* size("35 110")
      attached.term.write("\u001d")
      yield* eventually("the detach", () => attached.exitCode() !== undefined)
      expect(attached.exitCode()).toBe(0)
      yield* server.call("kill_bash", { shell_id: "s1" })
      expect(server.leftovers()).toEqual([])
    }))

  it.scopedLive("tty: true where no pty package is installed is a tool error naming the package to install; other calls work", () =>
    Effect.gen(function*() {
      const { bin } = yield* binElsewhere
      const server = yield* mcpServer([], { NODE_PATH: undefined }, bin)
      const refused = yield* server.call("bash", { command: "python3 -q", run_in_background: true, tty: true })
      expect(refused.isError).toBe(true)
      expect(refused.text).toMatch(/^tty: true needs the optional package @lydell\/node-pty, .*run `npm i @lydell\/node-pty` where corral is installed, or run the command without tty \(@lydell\/node-pty is not installed; node-pty is not installed\)\. Tell the user, or run the command without tty: true\.$/)
      const plain = yield* server.call("bash", { command: "echo still serving" })
      expect(plain.text).toMatch(/^still serving\n\[exited with code 0/)
      expect(server.leftovers()).toEqual([])
    }))
})
