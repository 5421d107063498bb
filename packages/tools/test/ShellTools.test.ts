import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Decision, PermissionGate } from "@corral/tools/PermissionGate"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as ShellTools from "@corral/tools/ShellTools"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe.skipIf(!inPidNamespace)("ShellTools over real processes (stopping groups orphans processes: needs the PID namespace of npm test)", () => {
  describe("bash in the foreground", () => {
    it.live("returns stdout and stderr interleaved with the exit status", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "echo out; echo err >&2; exit 3" })
        expect(okText(result)).toMatch(/^out\nerr\n\[exited with code 3 after \d+ms\]$/)
        expect(result.ok && result.metadata).toMatchObject({ exit_code: 3, timed_out: false, left_running: 0 })
      })))

    it.live("says which signal killed the command", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "kill -s TERM $$" })
        expect(okText(result)).toMatch(/^\(no output\)\n\[killed by SIGTERM after/)
      })))

    it.live("keeps the head and the tail of long output, saying how much was cut", () =>
      withTools(Effect.gen(function*() {
        // 1..20000, one per line: 108894 characters
        const text = okText(yield* call("bash", { command: "seq 1 20000" }))
        expect(text.startsWith("1\n2\n3\n")).toBe(true)
        expect(text).toContain("\n19999\n20000\n[exited with code 0")
        expect(text).toContain("[... 78894 characters cut from the middle of 108894: to see all of it, redirect the output to a file")
        expect(text.length).toBeLessThan(30_000 + 400)
      })))

    it.live("runs in workdir, relative to the tools' cwd", () =>
      Effect.gen(function*() {
        const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-tools-")))
        fs.mkdirSync(path.join(root, "sub"))
        try {
          const text = yield* withTools(Effect.map(call("bash", { command: "pwd", workdir: "sub" }), okText), { cwd: root })
          expect(text.split("\n")[0]).toBe(path.join(root, "sub"))
        } finally {
          fs.rmSync(root, { recursive: true })
        }
      }))

    it.live("stops the command at the timeout and says how long it waited", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "echo begun; sleep 30 & wait", timeout: 300 })
        const text = okText(result)
        expect(text).toMatch(/^begun\n\[timed out after \d+ms \(timeout: 300 ms\); stopped its process group, 2 processes: SIGTERM sufficed\]/)
        expect(text).toContain("run_in_background: true")
        expect(result.ok && result.metadata).toMatchObject({ timed_out: true, signal: "SIGTERM" })
      })))

    it.live("says SIGKILL was needed when the command ignores SIGTERM", () =>
      withTools(Effect.gen(function*() {
        const text = okText(yield* call("bash", { command: "trap '' TERM; echo armed; sleep 30", timeout: 300 }))
        expect(text).toContain("[timed out after")
        expect(text).toContain("it escalated to SIGKILL because something ignored SIGTERM for the 300ms grace period")
      })))

    it.live("returns when the command does, though a grandchild holds the pipe, and stops it", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "sleep 30 & echo started" })
        const text = okText(result)
        expect(text).toMatch(/^started\n\[exited with code 0 after \d+m?s\]\n\[stopped 1 process the command left running \(SIGTERM sufficed\)\. To keep a process running after the command returns, start it with run_in_background: true\.\]$/)
        expect(result.ok && result.metadata).toMatchObject({ left_running: 1 })
      })))

    it.live("finds a setsid escaper holding the pipe by its tag", () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-tools-"))
        // the command returns once its child has left the session
        const command = "setsid sh -c 'touch escaped; exec sleep 30' & while [ ! -e escaped ]; do sleep 0.01; done; echo away"
        try {
          const text = yield* withTools(Effect.map(call("bash", { command }), okText), { cwd: dir })
          expect(text).toContain("away\n[exited with code 0")
          expect(text).toContain("1 process had left the process group with setsid and was signalled by pid")
        } finally {
          fs.rmSync(dir, { recursive: true })
        }
      }))
  })

  describe("bash in the background", () => {
    it.live("returns at once with the id, the first output and how to read and stop it", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "echo booting; sleep 30", run_in_background: true, timeout: 5 })
        const text = okText(result)
        expect(text).toMatch(/^Started background shell s1 \(pid \d+\): echo booting; sleep 30\n/)
        expect(text).toContain("(timeout does not apply to a background shell and was ignored)")
        expect(text).toContain("Output so far:\nbooting\n[status: running, for")
        expect(text).toContain(`bash_output {"shell_id": "s1"} (the first read starts from the beginning)`)
        expect(text).toContain(`kill_bash {"shell_id": "s1"}`)
        expect(result.ok && result.metadata).toMatchObject({ shell_id: "s1", state: "Running", background: true })
        // the start only had a look: the first read, and a wait_for, see that output too
        expect(okText(yield* call("bash_output", { shell_id: "s1", wait_for: "booting" }))).toMatch(
          /^booting\n\[wait_for \/booting\/: a new line matched after \d+ms\]\n\[status: running, for/
        )
        expect(okText(yield* call("bash_output", { shell_id: "s1" }))).toMatch(/^\(no new output\)\n\[status: running, for/)
      })))

    it.live("bash_output: new output, tail_lines, filter, the exit status", () =>
      withTools(Effect.gen(function*() {
        yield* call("bash", { command: "sleep 0.3; printf 'a1\\nb2\\na3\\n'; exit 4", run_in_background: true })
        const first = okText(yield* call("bash_output", { bash_id: "s1", wait_for: "a3" }))
        expect(first).toMatch(/^a1\nb2\na3\n\[wait_for \/a3\/: a new line matched after/)
        const settled = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "never", wait_timeout: 5000 }))
        expect(settled).toMatch(/\[wait_for \/never\/: the shell ended after \d+m?s, and no new line matched\]\n\[status: exited with code 4 after/)
        expect(okText(yield* call("bash_output", { shell_id: "s1", tail_lines: 2 }))).toMatch(/^b2\na3\n\[status: exited with code 4/)
        expect(okText(yield* call("bash_output", { shell_id: "s1", tail_lines: 10, filter: "^a" }))).toMatch(/^a1\na3\n\[status/)
      })))

    it.live("bash_output: says when waiting timed out, and when output was dropped before it was read", () =>
      withTools(Effect.gen(function*() {
        // 5000 bytes at once into a 1 KiB buffer, then 5000 more half a second later
        const burst = (c: string) => `head -c 5000 /dev/zero | tr '\\0' ${c}; echo`
        const started = okText(yield* call("bash", { command: `${burst("x")}; sleep 0.5; ${burst("y")}; sleep 30`, run_in_background: true }))
        expect(started).toMatch(/\[note: \d+ bytes of output were dropped before you read them: only the last 1 KiB are kept\. Use filter or tail_lines to find what matters\.\]/)
        yield* call("bash_output", { shell_id: "s1" })
        const text = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "ready", wait_timeout: 1500 }))
        expect(text).toMatch(/^y+\n\[wait_for \/ready\/: no new line matched within [\d.]+s; the shell is still running/)
        expect(text).toMatch(/\[note: \d+ bytes of output were dropped before you read them: only the last 1 KiB are kept\. Read more often, or use filter\.\]/)
      }), { limits: { bufferBytes: 1024 } }))

    it.live("kill_bash stops the group and says SIGTERM sufficed", () =>
      withTools(Effect.gen(function*() {
        yield* call("bash", { command: "sleep 30 & sleep 30 & wait", run_in_background: true })
        const text = okText(yield* call("kill_bash", { shell_id: "s1" }))
        expect(text).toMatch(/^Killed shell s1 \(sleep 30 & sleep 30 & wait\): stopped 3 processes in \d+m?s: SIGTERM sufficed\./)
        expect(text).toMatch(/\[status: killed by SIGTERM \(stopped on request\) after/)
        expect(okText(yield* call("kill_bash", { shell_id: "s1" }))).toMatch(/^Shell s1 \(.*\) had already ended: nothing to stop\./)
      })))

    it.live("kill_bash says when it escalated to SIGKILL", () =>
      withTools(Effect.gen(function*() {
        yield* call("bash", { command: "trap '' TERM; echo armed; sleep 30", run_in_background: true })
        yield* call("bash_output", { shell_id: "s1", wait_for: "armed" })
        const text = okText(yield* call("kill_bash", { shell_id: "s1" }))
        expect(text).toContain("it escalated to SIGKILL because something ignored SIGTERM for the 300ms grace period")
        expect(text).toContain("[status: killed by SIGKILL (stopped on request)")
      })))

    it.live("the tools' spans hold the registry's: a trace shows bash over ShellRegistry.start, kill_bash over ShellRegistry.kill", () =>
      withTools(Effect.gen(function*() {
        const native = yield* Effect.tracer
        const spans: Array<string> = []
        const recording = Tracer.make({
          span: (name, parent, ...rest) => {
            if (name.startsWith("ShellRegistry.")) {
              spans.push(`${name} under ${Option.match(parent, { onNone: () => "root", onSome: (p) => (p._tag === "Span" ? p.name : "external") })}`)
            }
            return native.span(name, parent, ...rest)
          },
          context: native.context
        })
        yield* Effect.withTracer(call("bash", { command: "sleep 30", run_in_background: true }), recording)
        yield* Effect.withTracer(call("kill_bash", { shell_id: "s1" }), recording)
        expect(spans).toEqual(["ShellRegistry.start under ShellTools.bash", "ShellRegistry.kill under ShellTools.kill_bash"])
      })))

    it.live("list_shells shows id, status, time and command", () =>
      withTools(Effect.gen(function*() {
        expect(okText(yield* call("list_shells"))).toBe("No background shells. Start one with bash run_in_background: true.")
        yield* call("bash", { command: "sleep 30", run_in_background: true })
        yield* call("bash", { command: "exit 2", run_in_background: true })
        // under load the exit may not have been seen yet: wait for it
        yield* call("bash_output", { shell_id: "s2", wait_for: "never", wait_timeout: 5000 })
        const text = okText(yield* call("list_shells"))
        expect(text).toMatch(/^2 shells, 1 running:\nid +status +time +command\ns1 +running +\d+m?s +sleep 30\ns2 +exited with code 2 +\d+m?s +exit 2$/)
      })))
  })

  it.live("serves an Effect AI language model: its tool calls run and come back as results", () =>
    withTools(Effect.gen(function*() {
      const model = yield* LanguageModel.make({
        generateText: () =>
          Effect.succeed([
            { type: "tool-call", id: "call-1", name: "bash", params: { command: "echo from the model" } },
            { type: "tool-call", id: "call-2", name: "bash_output", params: { shell_id: "s5" } }
          ]),
        streamText: () => Stream.empty
      })
      const response = yield* LanguageModel.generateText({ prompt: "run it", toolkit: ShellTools.toolkit }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model)
      )
      const results = response.toolResults.map((r) => ({ name: r.name, isFailure: r.isFailure, result: r.result }))
      expect(results).toMatchObject([
        { name: "bash", isFailure: false, result: { text: expect.stringMatching(/^from the model\n\[exited with code 0/) } },
        { name: "bash_output", isFailure: true, result: { _tag: "ToolError", reason: "UnknownShell" } }
      ])
    })))

  describe("ownership and the permission gate", () => {
    it.live("kill_bash reaches only the caller's own shells", () =>
      withTools(Effect.gen(function*() {
        yield* call("bash", { command: "sleep 30", run_in_background: true })
        const other = yield* Effect.provide(call("kill_bash", { shell_id: "s1" }), ShellTools.layer({ owner: "someone else" }))
        expect(other).toMatchObject({ ok: false, reason: "NotOwner" })
        expect(other.text).toBe(`shell s1 belongs to "test", not "someone else": only its owner can stop it; you can only stop the shells you started.`)
      })))

    it.live("asks the gate about foreground and background bash alike, and never about reads", () =>
      Effect.gen(function*() {
        const asked = yield* Ref.make<ReadonlyArray<string>>([])
        const gate = PermissionGate.layerWith((tool, subject) => Effect.as(Ref.update(asked, (all) => [...all, `${tool}: ${subject}`]), Decision.Allow()))
        yield* withTools(Effect.gen(function*() {
          yield* call("bash", { command: "echo fg" })
          yield* call("bash", { command: "sleep 30", run_in_background: true })
          yield* call("bash_output", { shell_id: "s1" })
          yield* call("list_shells")
          yield* call("kill_bash", { shell_id: "s1" })
        }), { gate })
        expect(yield* Ref.get(asked)).toEqual(["bash: bash echo fg", "bash: bash sleep 30"])
      }))

    it.live("a denial is a tool error with the gate's reason, and nothing runs", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "touch should-not-exist", run_in_background: true })
        expect(result).toMatchObject({ ok: false, reason: "PermissionDenied" })
        expect(result.text).toBe("permission denied for `bash touch should-not-exist`: writes are not allowed here. Do not retry it as is: take another approach, or ask the user.")
        expect(okText(yield* call("list_shells"))).toContain("No background shells")
      }), { gate: PermissionGate.layerWith(() => Effect.succeed(Decision.Deny({ reason: "writes are not allowed here" }))) }))

    it.live("an ask the host cannot put to anyone is refused, saying how to allow it", () =>
      withTools(Effect.gen(function*() {
        const result = yield* call("bash", { command: "npm publish" })
        expect(result).toMatchObject({ ok: false, reason: "PermissionDenied" })
        expect(result.text).toBe(
          "`bash npm publish` needs the user's approval, and this host has no way to ask for it. Tell the user what you want to run and why; they can allow it: add it to allowed_commands, or run it themselves."
        )
      }), { gate: PermissionGate.layerWith(() => Effect.succeed(Decision.Ask({ hint: "add it to allowed_commands" }))) }))
  })

  describe("bad input is a tool error that says what to do", () => {
    // the registry words why an id is unknown; the tool adds where to look
    const unknown = (id: string) => new RegExp(`^no shell with id "${id}" \\(there are no shells\\)\\. .* list_shells shows the shells there are\\.$`)
    const cases: ReadonlyArray<readonly [string, keyof ShellTools.Tools, Record<string, unknown>, string | RegExp]> = [
      ["empty command", "bash", { command: "  " }, "command is empty: pass the command line to run, for example `npm test`"],
      ["NUL byte", "bash", { command: "echo a\0b" }, "command contains a NUL byte (\\0), which no process can receive: remove it"],
      ["missing workdir", "bash", { command: "ls", workdir: "/no/such/dir" }, "working directory /no/such/dir does not exist: create it or pass an existing directory"],
      ["timeout over the maximum", "bash", { command: "ls", timeout: 600_001 }, "timeout 600001 ms is over the maximum of 600000 ms (10 minutes): for a longer command, set run_in_background: true and wait for it with bash_output wait_for"],
      ["timeout below 1", "bash", { command: "ls", timeout: 0 }, "timeout must be a whole number of milliseconds, at least 1; got 0"],
      ["unknown id", "bash_output", { shell_id: "s7" }, unknown("s7")],
      ["no id", "bash_output", {}, "shell_id is missing: pass the id bash returned when it started the background shell (list_shells shows them)"],
      ["tail_lines below 1", "bash_output", { shell_id: "s1", tail_lines: 0 }, "tail_lines must be a whole number, at least 1; got 0. Leave it out to read what is new since your last read."],
      ["invalid filter", "bash_output", { shell_id: "s1", filter: "(" }, `filter "(" is not a valid regular expression (/(/: Unterminated group): escape special characters such as ( [ { * + ? with a backslash to match them literally`],
      ["invalid wait_for", "bash_output", { shell_id: "s1", wait_for: "[a" }, `wait_for "[a" is not a valid regular expression (/[a/: Unterminated character class): escape special characters such as ( [ { * + ? with a backslash to match them literally`],
      ["wait_timeout over the maximum", "bash_output", { shell_id: "s1", wait_for: "x", wait_timeout: 600_001 }, "wait_timeout 600001 ms is over the maximum of 600000 ms (10 minutes): wait that long at most, then call bash_output again"],
      ["kill of an unknown id", "kill_bash", { shell_id: "s9" }, unknown("s9")]
    ]
    for (const [what, tool, params, message] of cases) {
      it.live(what, () =>
        withTools(Effect.gen(function*() {
          const result = yield* call(tool, params)
          expect(result.ok).toBe(false)
          if (message instanceof RegExp) expect(result.text).toMatch(message)
          else expect(result.text).toBe(message)
        })))
    }
  })
})

describe("toolDefinitions", () => {
  it("gives each tool a name, a description and draft-07 object parameters", () => {
    const definitions = ShellTools.toolDefinitions()
    expect(definitions.map((d) => d.name)).toEqual(["bash", "bash_output", "kill_bash", "list_shells", "write_stdin"])
    for (const d of definitions) {
      expect(d.description.length).toBeGreaterThan(80)
      expect(d.parameters).toMatchObject({ type: "object", additionalProperties: false })
      expect(JSON.stringify(d.parameters)).not.toContain("$ref")
    }
    const [bash, output, kill, list] = definitions
    expect(bash!.parameters).toMatchObject({
      required: ["command"],
      properties: {
        command: { type: "string", minLength: 1 },
        workdir: { type: "string" },
        timeout: { type: "integer", minimum: 1, maximum: 600_000 },
        run_in_background: { type: "boolean" },
        description: { type: "string" }
      }
    })
    expect(Object.keys((output!.parameters as { properties: object }).properties)).toEqual(
      ["shell_id", "bash_id", "tail_lines", "filter", "wait_for", "wait_timeout"]
    )
    expect(output!.parameters).toMatchObject({ required: ["shell_id"], properties: { tail_lines: { type: "integer", minimum: 1, maximum: 10_000 } } })
    expect(kill!.parameters).toMatchObject({ required: ["shell_id"] })
    expect(list!.parameters).toEqual({ type: "object", required: [], properties: {}, additionalProperties: false })
    expect(bash!.description).toContain("run_in_background")
    expect(bash!.description).toContain("wait_for")
    expect(bash!.description).toContain("Always stop what you start")
  })
})
