/**
 * `corral attach ID` end to end: a real supervisor in a child process (as in
 * surface.test.ts), the built bin, input piped in or typed on a terminal of
 * its own (a pty from the test), and /proc read directly.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { wchanOf } from "../packages/core/test/helpers.js"
import { attachOnTerminal } from "./fixtures/attachTerminal.js"
import { carrying, corral, isAlive, spawnCorral, stateDir, supervisor, waitFor } from "./fixtures/surfaceProcesses.js"

const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"

/** Echoes each line; an interrupted read (SIGINT, trapped) reads on. */
const readLoop = `trap 'echo interrupted' INT; while :; do if read -r line; then echo "got: $line"; elif [ $? -gt 128 ]; then continue; else break; fi; done; echo "stdin ended"`

describe("corral attach usage", () => {
  const bad: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [["attach"], "corral: attach needs the id of a shell, like 4242:s1: `corral ls` lists them; `corral attach --help` gives its usage\n"],
    [["attach", "1:s1", "2:s1"], "corral: attach takes one shell id, got 2: 1:s1 2:s1; `corral attach --help` gives its usage\n"],
    [["attach", "--raw", "1:s1"], "corral: unknown option --raw for attach: it takes --help; `corral attach --help` gives its usage\n"],
    [["attach", "s1"], `corral: invalid shell id "s1": expected <supervisor pid>:<shell id>, like 4242:s1, as \`corral ls\` shows it (it is also the CORRAL_SHELL_ID of the shell's processes)\n`]
  ]
  for (const [args, message] of bad) {
    it.scopedLive(`refuses ${args.join(" ")} with exit status 125 and one line`, () =>
      Effect.gen(function*() {
        const done = yield* corral(yield* stateDir, args)
        expect({ code: done.code, stdout: done.stdout, stderr: done.stderr }).toEqual({ code: 125, stdout: "", stderr: message })
      }))
  }

  it.scopedLive("prints its help, which says how to detach", () =>
    Effect.gen(function*() {
      const done = yield* corral(yield* stateDir, ["attach", "--help"])
      expect(done.code).toBe(0)
      expect(done.stdout).toMatch(/^usage: corral attach ID\n/)
      expect(done.stdout).toContain("Ctrl-] detaches")
      expect((yield* corral(yield* stateDir, ["--help"])).stdout).toContain("corral attach ID")
    }))
})

describe.skipIf(!inPidNamespace)("corral attach (supervisors' watchers outlive them: needs the PID namespace of npm test)", () => {
  it.scopedLive("pipes lines to a shell's stdin, passes Ctrl-C on as SIGINT, and detaches at the end of input, leaving the shell running", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", [`stdin:${readLoop}`])
      const id = a.id(1)
      const attached = yield* spawnCorral(dir, ["attach", id])
      attached.child.stdin.write("hello\n")
      yield* waitFor("the answer", () => (attached.stdout().includes("got: hello\n") ? true : undefined))
      attached.child.kill("SIGINT")
      yield* waitFor("the interrupt", () => (attached.stdout().includes("interrupted\n") ? true : undefined))
      attached.child.stdin.end()
      const detached = yield* attached.finished
      expect({ code: detached.code, stderr: detached.stderr }).toEqual({ code: 0, stderr: "" })
      expect(detached.stdout).toBe("got: hello\ninterrupted\n")

      // the shell's stdin stayed open: a second attach writes on, and a line with Ctrl-] detaches
      const again = yield* spawnCorral(dir, ["attach", id])
      again.child.stdin.write("again\n")
      yield* waitFor("the second answer", () => (again.stdout().includes("got: again\n") ? true : undefined))
      again.child.stdin.write("last\n")
      yield* waitFor("the last answer", () => (again.stdout().includes("got: last\n") ? true : undefined))
      again.child.stdin.write("\u001d\n")
      const second = yield* again.finished
      expect(second.code).toBe(0)
      // the retained output first, then what came while attached
      expect(second.stdout).toBe("got: hello\ninterrupted\ngot: again\ngot: last\n")
      expect(isAlive(a.shells[0]!.pid)).toBe(true)
    }))

  it.scopedLive("follows a shell on a terminal until it ends, then says how it ended", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["tty:python3 -q"])
      const attached = yield* spawnCorral(dir, ["attach", a.id(1)])
      attached.child.stdin.write("6 * 7\n")
      yield* waitFor("the answer", () => (/\n42\r?\n>>> $/.test(attached.stdout()) ? true : undefined))
      attached.child.stdin.write("exit()\n")
      const done = yield* attached.finished
      expect(done.code).toBe(0)
      expect(done.stderr).toBe(`corral: shell ${a.id(1)} ended: exited 0\n`)
      expect(carrying(`${a.pid}:`)).toEqual([])
    }))

  it.scopedLive("on a terminal of its own, sends every key as typed: Ctrl-C interrupts the REPL's job, Ctrl-] detaches", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["tty:python3 -q"])
      const attached = yield* attachOnTerminal(dir, a.id(1))
      // a wait that times out says how the screen ends
      const onScreen = (what: string, shown: RegExp) =>
        waitFor(what, () => (shown.test(attached.screen()) ? true : undefined)).pipe(
          Effect.catchAllDefect((defect) => Effect.dieMessage(`${String(defect)}; the screen ends: ${JSON.stringify(attached.screen().slice(-300))}`))
        )
      yield* onScreen("the prompt", />>> $/)
      // raw: Enter is a carriage return, which the shell's terminal turns into a newline
      attached.term.write("import time; time.sleep(600)\r")
      yield* onScreen("the sleep", /time\.sleep\(600\)\r*\n/)
      // the echo comes before Python runs the line, and Python 3.11 looks for a SIGINT that came just before
      // its sleep only once the sleep ends (in 600 s): the key goes once it sleeps in the kernel
      yield* waitFor("Python in its sleep", () => carrying(a.shells[0]!.tag).find((pid) => /nanosleep/.test(wchanOf(pid))))
      attached.term.write("\u0003")
      yield* onScreen("the interrupt", /KeyboardInterrupt\r*\n>>> $/)
      attached.term.write("\u001d")
      yield* waitFor("the detach", () => attached.exitCode())
      expect(attached.exitCode()).toBe(0)
      expect(isAlive(a.shells[0]!.pid)).toBe(true)
    }))

  it.scopedLive("refuses a shell that takes no input, and one that does not exist, with exit status 1", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["sleep 60"])
      const attached = yield* spawnCorral(dir, ["attach", a.id(1)])
      attached.child.stdin.write("hello\n")
      const refused = yield* attached.finished
      expect(refused.code).toBe(1)
      expect(refused.stderr).toBe(`corral: shell ${a.id(1)} takes no input: it was started without a stdin pipe or a terminal, or its stdin was closed (end of file); the bash tool's background shells keep stdin open\n`)
      const missing = yield* corral(dir, ["attach", `${a.pid}:s9`])
      expect(missing.code).toBe(1)
      expect(missing.stderr).toBe(`corral: no shell with id ${a.pid}:s9 (known ids: ${a.id(1)})\n`)
    }))
})
