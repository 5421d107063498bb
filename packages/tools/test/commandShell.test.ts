/**
 * `bash` runs bash, whatever `$SHELL` says, with an environment that keeps
 * piped output flowing; every result carries the command's real exit status.
 */
import { spawnSync } from "node:child_process"
import * as CommandShell from "@corral/core/CommandShell"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

const hasPython = spawnSync("python3", ["-c", "pass"]).status === 0

describe("CommandShell", () => {
  it("defaults to bash, not $SHELL", () => {
    const shell = CommandShell.resolveDefault()
    expect(shell.path).toMatch(/\/bash$/)
    expect(shell.note).toBeUndefined()
  })

  it("falls back to /bin/sh with a one-line note when no bash is found", () => {
    const shell = CommandShell.resolveDefault(["/nonexistent/bash"])
    expect(shell).toEqual({
      path: "/bin/sh",
      note: "bash is not installed (looked for /nonexistent/bash): commands run with /bin/sh, where bash syntax such as [[ ]] fails"
    })
  })

  it("resolves a name in PATH, and says why a shell cannot run", () => {
    expect(CommandShell.resolve("sh", { PATH: "/nonexistent:/bin" })).toEqual({ path: "/bin/sh" })
    expect(CommandShell.resolve("zsh-nope", { PATH: "/bin" })).toBe("no zsh-nope in PATH: pass the path of a shell such as /bin/bash")
    expect(CommandShell.resolve("/etc/passwd")).toBe("/etc/passwd is not an executable file: pass the path of a shell such as /bin/bash")
    expect(CommandShell.resolve("/tmp")).toBe("/tmp is not an executable file: pass the path of a shell such as /bin/bash")
    expect(CommandShell.resolve(" ")).toBe("the shell is empty: pass a path such as /bin/bash, or leave it out for bash")
  })

  it("lets the caller's environment override the unbuffered defaults", () => {
    expect(CommandShell.environment({ PYTHONUNBUFFERED: "0", HOME: "/h" })).toMatchObject({ PYTHONUNBUFFERED: "0", PAGER: "cat", HOME: "/h" })
  })
})

describe.skipIf(!inPidNamespace)("the bash tool's shell (needs the PID namespace of npm test)", () => {
  it.live("runs bash syntax in the foreground and the background, with SHELL set to something else", () =>
    withTools(Effect.gen(function*() {
      const previous = process.env.SHELL
      process.env.SHELL = "/bin/sh"
      try {
        const fg = yield* call("bash", { command: "[[ 1 == 1 ]] && echo yes; arr=(a b); echo ${arr[1]} $BASH_VERSINFO" })
        expect(okText(fg)).toMatch(/^yes\nb \d+\n\[exited with code 0 after/)
        expect(fg.ok && fg.metadata.shell).toMatch(/\/bash$/)
        const bg = yield* call("bash", { command: "[[ a == a ]] && echo bg-bash", run_in_background: true })
        const id = bg.ok ? String(bg.metadata.shell_id) : ""
        const out = yield* call("bash_output", { shell_id: id, wait_for: "bash", wait_timeout: 10_000 })
        expect(okText(out)).toContain("bg-bash")
      } finally {
        if (previous === undefined) delete process.env.SHELL
        else process.env.SHELL = previous
      }
    })))

  it.live("a false [[ ]] and a non-zero exit are results carrying the real status, not tool errors", () =>
    withTools(Effect.gen(function*() {
      const falseTest = yield* call("bash", { command: "[[ 1 == 2 ]]" })
      expect(okText(falseTest)).toMatch(/^\(no output\)\n\[exited with code 1 after/)
      expect(falseTest.ok && falseTest.metadata.exit_code).toBe(1)
      const notFound = yield* call("bash", { command: "no-such-command-anywhere" })
      expect(okText(notFound)).toMatch(/command not found\n\[exited with code 127 after/)
      const pipefail = yield* call("bash", { command: "set -o pipefail; false | cat" })
      expect(pipefail.ok && pipefail.metadata.exit_code).toBe(1)
    })))

  it.live("falls back to sh, saying so once, in the first result only", () =>
    withTools(
      Effect.gen(function*() {
        const first = okText(yield* call("bash", { command: "[[ 1 == 1 ]]" }))
        expect(first).toMatch(/\[\[: not found\n\[exited with code 127 after .*\]\n\[note: bash is not installed \(looked for \/nonexistent\/bash\): commands run with \/bin\/sh, where bash syntax such as \[\[ \]\] fails\]$/)
        const second = okText(yield* call("bash", { command: "echo ok" }))
        expect(second).not.toContain("note")
      }),
      { registry: { shell: CommandShell.resolveDefault(["/nonexistent/bash"]) } }
    ))

  it.live("runs the configured shell", () =>
    withTools(
      Effect.gen(function*() {
        expect(okText(yield* call("bash", { command: "echo $0" }))).toMatch(/^\/bin\/sh\n/)
      }),
      { registry: { shell: "/bin/sh" } }
    ))

  it.live("sets the unbuffered environment", () =>
    withTools(Effect.gen(function*() {
      const text = okText(yield* call("bash", { command: "echo $PYTHONUNBUFFERED $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT" }))
      expect(text).toMatch(/^1 cat cat 0\n/)
    })))

  it.live.skipIf(!hasPython)("a Python script's output under wait_for arrives as it prints, not when it exits", () =>
    withTools(Effect.gen(function*() {
      const started = yield* call("bash", {
        command: `python3 -c "import time; print('ready', flush=False); time.sleep(60)"`,
        run_in_background: true
      })
      const id = started.ok ? String(started.metadata.shell_id) : ""
      const waited = yield* call("bash_output", { shell_id: id, wait_for: "ready", wait_timeout: 20_000 })
      expect(okText(waited)).toMatch(/^ready\n\[wait_for \/ready\/: a new line matched/)
      yield* call("kill_bash", { shell_id: id })
    })))

  it.live("a wait_for that times out on a shell silent since it started says the program may be buffering, and how to fix it", () =>
    withTools(Effect.gen(function*() {
      // perl block-buffers a pipe, and no environment variable changes that
      const silent = yield* call("bash", { command: `perl -e 'print "ready\\n"; sleep 30'`, run_in_background: true })
      const id = silent.ok ? String(silent.metadata.shell_id) : ""
      const waited = okText(yield* call("bash_output", { shell_id: id, wait_for: "ready", wait_timeout: 300 }))
      expect(waited).toMatch(/^\(no new output\)\n\[wait_for \/ready\/: no new line matched within \d+ms, and the shell has printed nothing at all since it started\. It is still running; the program may be buffering its output because stdout is a pipe, not a terminal: make it flush \(python -u, stdbuf -oL CMD/)
      // one that printed something else is only still running
      const talking = yield* call("bash", { command: "echo compiling; sleep 30", run_in_background: true })
      const other = talking.ok ? String(talking.metadata.shell_id) : ""
      const second = okText(yield* call("bash_output", { shell_id: other, wait_for: "ready", wait_timeout: 300 }))
      expect(second).toContain("no new line matched within")
      expect(second).not.toContain("buffering")
      yield* call("kill_bash", { shell_id: id })
      yield* call("kill_bash", { shell_id: other })
    })))
})
