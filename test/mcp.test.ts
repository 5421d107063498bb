/**
 * `corral mcp` end to end: the real bin as a child process, the official MCP
 * SDK client on the other end of its stdio, /proc to check what is left.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { CallToolResultSchema, ListToolsResultSchema, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { inPidNamespace } from "../packages/tools/test/helpers.js"
import { corralBin, eventually, mcpServer, schemaProblem } from "./fixtures/mcpHarness.js"
import { decodeListing } from "./fixtures/surfaceProcesses.js"

/** Every line the server wrote to stdout is a JSON-RPC message. */
const expectOnlyProtocol = (lines: ReadonlyArray<string>) => {
  expect(lines.length).toBeGreaterThan(0)
  for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" })
}

const devServer = fileURLToPath(new URL("./fixtures/mcpDevServer.mjs", import.meta.url))

describe("corral mcp usage", () => {
  it("prints its help, with the client configuration", () => {
    const result = spawnSync(process.execPath, [corralBin, "mcp", "--help"], { encoding: "utf8" })
    expect(result.status).toBe(0)
    expect(result.stdout).toContain("usage: corral mcp [--cwd DIR] [--max-shells N] [--grace D]")
    expect(result.stdout).toContain(`{ "mcpServers": { "corral": { "command": "corral", "args": ["mcp"] } } }`)
  })

  const bad: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [["--max-shells", "0"], `corral: --max-shells needs a whole number of at least 1, like --max-shells 8; got "0"\n`],
    [["--grace", "soon"], `corral: --grace: invalid duration "soon": use a number with an optional unit, like 500ms, 3s, 2m or 1h (bare numbers are seconds)\n`],
    [["--cwd", "/no/such/dir"], "corral: --cwd /no/such/dir does not exist: pass an existing directory\n"],
    [["--name", " "], `corral: --name needs a name for corral ls to show, like --name "review agent"; got an empty one\n`],
    [["--shell", "/no/such/bash"], "corral: --shell: /no/such/bash is not an executable file: pass the path of a shell such as /bin/bash\n"],
    [["--containment", "jail"], `corral: --containment must be one of auto, cgroup, pidns, procScan; got "jail"\n`],
    [["serve"], `corral: Unexpected argument 'serve'. This command does not take positional arguments. corral mcp takes --cwd DIR, --max-shells N, --grace D, --containment C, --shell PATH, --name NAME and --help\n`]
  ]
  for (const [args, message] of bad) {
    it(`refuses ${args.join(" ")} with exit status 125`, () => {
      const result = spawnSync(process.execPath, [corralBin, "mcp", ...args], { encoding: "utf8" })
      expect(result.status).toBe(125)
      expect(result.stdout).toBe("")
      expect(result.stderr).toBe(message)
    })
  }
})

describe("the MCP SDK's schemas, by which the harness checks every message corral mcp sends", () => {
  const methodOf = (id: unknown) => (({ 1: "tools/call", 2: "tools/list", 3: "ping" }) as Record<string, string>)[String(id)]

  it("pass results, errors and notifications as corral sends them", () => {
    const good: ReadonlyArray<unknown> = [
      { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "hello" }], isError: false, _meta: { "corral/result": { exit_code: 0 } } } },
      { jsonrpc: "2.0", id: 2, result: { tools: [{ name: "bash", inputSchema: { type: "object", properties: {}, required: [] } }] } },
      { jsonrpc: "2.0", id: 3, result: {} },
      { jsonrpc: "2.0", id: 1, error: { code: -32602, message: "unknown tool" } },
      { jsonrpc: "2.0", id: null, error: { code: -32700, message: "not JSON" } },
      { jsonrpc: "2.0", method: "notifications/message", params: { level: "notice", logger: "corral", data: { text: "shell s1 exited" } } }
    ]
    for (const message of good) expect(schemaProblem(message, methodOf)).toBeUndefined()
  })

  it("refuse a malformed result, error or notification, saying which", () => {
    const bad: ReadonlyArray<readonly [unknown, RegExp]> = [
      [{ jsonrpc: "2.0", id: 1, result: { content: [{ type: "text" }] } }, /the tools\/call result does not parse with the MCP SDK's schema/],
      [{ jsonrpc: "2.0", id: 1, result: { isError: true } }, /a tools\/call result without content/],
      [{ jsonrpc: "2.0", id: 2, result: { tools: [{ name: "bash" }] } }, /the tools\/list result does not parse/],
      [{ jsonrpc: "2.0", id: 3, result: { pong: true } }, /the ping result does not parse/],
      [{ jsonrpc: "2.0", id: 9, result: {} }, /answers no request sent \(id 9\)/],
      [{ jsonrpc: "2.0", id: 1, error: { code: "bad" } }, /the error does not parse/],
      [{ jsonrpc: "2.0", method: "notifications/message", params: { data: "no level" } }, /the notification does not parse/],
      [{ jsonrpc: "2.0", method: "notifications/made_up" }, /the notification does not parse/],
      [[], /not a JSON-RPC message/]
    ]
    for (const [message, problem] of bad) expect({ message, problem: schemaProblem(message, methodOf) }).toEqual({ message, problem: expect.stringMatching(problem) })
  })
})

describe.skipIf(!inPidNamespace)("corral mcp serving (stopping shells and exiting orphan processes: needs the PID namespace of npm test)", () => {
  it.scopedLive("lists the four tools with their schemas and annotations", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const { tools } = yield* Effect.promise(() => server.client.listTools())
      expect(tools.map((t) => t.name)).toEqual(["bash", "bash_output", "kill_bash", "list_shells", "write_stdin"])
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
      expect(byName.bash!.inputSchema).toMatchObject({
        type: "object",
        required: ["command"],
        additionalProperties: false,
        properties: { timeout: { type: "integer", maximum: 600_000 }, run_in_background: { type: "boolean" } }
      })
      expect(Object.keys(byName.bash_output!.inputSchema.properties!)).toEqual(
        ["shell_id", "bash_id", "tail_lines", "filter", "wait_for", "wait_timeout"]
      )
      expect(byName.kill_bash!.inputSchema).toMatchObject({ required: ["shell_id"] })
      expect(byName.list_shells!.inputSchema).toEqual({ type: "object", required: [], properties: {}, additionalProperties: false })
      expect(byName.bash!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true })
      expect(byName.bash_output!.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true, destructiveHint: false })
      expect(byName.list_shells!.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true, destructiveHint: false })
      expect(byName.kill_bash!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true })
      expect(byName.bash!.description).toContain("run_in_background")
    }))

  /** The supervisors `corral ls --json` finds in a server's state directory. */
  const supervisorNames = (stateDir: string): ReadonlyArray<string> => {
    const ls = spawnSync(process.execPath, [corralBin, "ls", "--json"], { encoding: "utf8", env: { ...process.env, CORRAL_STATE_DIR: stateDir } })
    return decodeListing(ls.stdout).supervisors.map((s) => s.supervisor.name)
  }

  it.scopedLive("is named after its MCP client in corral ls, show and top, unless --name says otherwise", () =>
    Effect.gen(function*() {
      const byClient = yield* mcpServer()
      yield* byClient.call("bash", { command: "sleep 30", run_in_background: true })
      yield* eventually("the client's name in corral ls", () => supervisorNames(byClient.stateDir).includes("corral-test"))
      const show = spawnSync(process.execPath, [corralBin, "show", `${byClient.pid}:s1`], {
        encoding: "utf8",
        env: { ...process.env, CORRAL_STATE_DIR: byClient.stateDir }
      })
      expect(show.stdout).toMatch(new RegExp(`\\nsupervisor +${byClient.pid} corral-test\\n`))
      const named = yield* mcpServer(["--name", "review agent"])
      yield* named.call("bash", { command: "sleep 30", run_in_background: true })
      // the client has initialized (the call was answered): its name did not replace --name
      expect(supervisorNames(named.stateDir)).toEqual(["review agent"])
    }))

  it.scopedLive("tells of shells that ended in the next result's text and _meta, and as log messages", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const logged: Array<{ text: string; shell_id: string }> = []
      server.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        if (n.params.logger === "corral") logged.push(n.params.data as { text: string; shell_id: string })
      })
      expect(server.client.getServerCapabilities()).toMatchObject({ logging: {} })
      yield* Effect.promise(() => server.client.setLoggingLevel("notice"))
      yield* server.call("bash", { command: "sleep 1; exit 3", run_in_background: true })
      // s1 may end while this call runs: its notice then comes with this result
      const second = yield* server.call("bash", { command: "sleep 1; exit 4", run_in_background: true })
      yield* eventually("both shells' log messages", () => logged.length >= 2)
      expect(logged.map((l) => l.text).sort()).toEqual([
        expect.stringMatching(/^shell s1 \(sleep 1; exit 3\) exited with code 3 after [\d.]+m?s; finished: the group is empty; 0 lines unread$/),
        expect.stringMatching(/^shell s2 \(sleep 1; exit 4\) exited with code 4 after /)
      ])
      const next = yield* server.call("bash", { command: "true" })
      const text = second.text + next.text
      expect(text).toMatch(/\n\[notice: shell s1 \(sleep 1; exit 3\) exited with code 3 after [\d.]+m?s; finished: the group is empty; 0 lines unread\]/)
      expect(text).toMatch(/\n\[notice: shell s2 \(sleep 1; exit 4\) exited with code 4 after /)
      const notices = [second, next].flatMap((r) => (r.meta?.notices ?? []) as ReadonlyArray<{ shell_id: string; exit_code: number }>)
      expect(notices.map((n) => [n.shell_id, n.exit_code]).sort()).toEqual([["s1", 3], ["s2", 4]])
      expectOnlyProtocol(server.stdoutLines)
    }))

  it.scopedLive("runs a foreground command and answers in plain text, metadata in _meta", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const result = yield* server.call("bash", { command: "echo hello" })
      expect(result.isError).toBe(false)
      expect(result.text).toMatch(/^hello\n\[exited with code 0 after \d+ms\]$/)
      expect(result.meta).toMatchObject({ exit_code: 0, timed_out: false, left_running: 0 })
      expectOnlyProtocol(server.stdoutLines)
    }))

  it.scopedLive("starts a background shell, polls it and sees it finish", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const started = yield* server.call("bash", { command: "echo one; sleep 0.5; echo two", run_in_background: true })
      expect(started.text).toMatch(/^Started background shell s1 \(pid \d+\): echo one; sleep 0\.5; echo two\nOutput so far:\none\n\[status: running, for/)
      let output = ""
      for (let i = 0; i < 100 && !output.includes("[status: exited"); i++) {
        output += (yield* server.call("bash_output", { shell_id: "s1" })).text + "\n"
        yield* Effect.sleep("50 millis")
      }
      // "two" and the exit may come in one read or two: the status follows the group's end
      expect(output).toMatch(/^one\n(.*\n)*two\n/)
      expect(output).toContain("[status: exited with code 0 after")
      expect((yield* server.call("list_shells")).text).toMatch(/^1 shell, 0 running:\nid +status +time +command\ns1 +exited with code 0 +\d/)
    }))

  it.scopedLive("waits for a ready line printed after a delay, reads the logs, stops the server and all it started", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      yield* server.call("bash", { command: `node ${devServer} 800`, run_in_background: true })
      const ready = yield* server.call("bash_output", { shell_id: "s1", wait_for: "ready on", wait_timeout: 20_000 })
      expect(ready.text).toMatch(/^dev server: compiling \(helper pid \d+\)\nready on http:\/\/127\.0\.0\.1:\d+\n\[wait_for \/ready on\/: a new line matched after [\d.]+m?s\]\n\[status: running, for/)
      const url = /ready on (\S+)/.exec(ready.text)![1]!
      const fetched = yield* server.call("bash", { command: `node -e "fetch('${url}/health').then(r => r.text()).then(console.log)"` })
      expect(fetched.text).toMatch(/^hello from the dev server\n\n\[exited with code 0/)
      expect((yield* server.call("bash_output", { shell_id: "s1" })).text).toMatch(/^GET \/health 200\n\[status: running/)
      const killed = yield* server.call("kill_bash", { shell_id: "s1" })
      // sh, node and its helper child (how many depends on whether sh execs its last command)
      expect(killed.text).toMatch(/^Killed shell s1 \(node .*\): stopped \d processes in \d+m?s: SIGTERM sufficed\./)
      expect(server.leftovers()).toEqual([])
    }))

  it.scopedLive("stops a stubborn shell, saying it escalated to SIGKILL", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "300ms"])
      yield* server.call("bash", { command: "trap '' TERM; echo armed; sleep 30 & wait", run_in_background: true })
      yield* server.call("bash_output", { shell_id: "s1", wait_for: "armed" })
      const killed = yield* server.call("kill_bash", { shell_id: "s1" })
      expect(killed.isError).toBe(false)
      expect(killed.text).toMatch(
        /^Killed shell s1 \(trap '' TERM; echo armed; sleep 30 & wait\): stopped 2 processes in [\d.]+m?s: it escalated to SIGKILL because something ignored SIGTERM for the 300ms grace period\.\n/
      )
      expect(killed.text).toContain("[status: killed by SIGKILL (stopped on request)")
      expect(killed.meta).toMatchObject({ killed: true, stop: { escalated: true, processes: 2 } })
      expect(server.leftovers()).toEqual([])
    }))

  it.scopedLive("refuses a shell over the cap, naming the running ones, and starts once one is stopped", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--max-shells", "2"])
      yield* server.call("bash", { command: "sleep 30", run_in_background: true })
      yield* server.call("bash", { command: "sleep 31", run_in_background: true })
      const refused = yield* server.call("bash", { command: "sleep 32", run_in_background: true })
      expect(refused).toMatchObject({
        isError: true,
        text: "2 background shells exist already, the limit: s1 (sleep 30), s2 (sleep 31). Stop one you no longer need with kill_bash, then start again."
      })
      yield* server.call("kill_bash", { shell_id: "s1" })
      expect((yield* server.call("bash", { command: "sleep 32", run_in_background: true })).text).toMatch(/^Started background shell s3 /)
    }))

  it.scopedLive("answers every bad input with a tool error that says what to do", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      yield* server.call("bash", { command: "sleep 30", run_in_background: true })
      // the registry words why an id is unknown; the tool adds where to look
      const unknown = expect.stringMatching(/^no shell with id "s9" \(known ids: s1\)\. .* list_shells shows the shells there are\.$/)
      const cases: ReadonlyArray<readonly [string, Record<string, unknown>, unknown]> = [
        ["bash_output", { shell_id: "s9" }, unknown],
        ["kill_bash", { shell_id: "s9" }, unknown],
        ["bash_output", { shell_id: "s1", filter: "(" }, `filter "(" is not a valid regular expression (/(/: Unterminated group): escape special characters such as ( [ { * + ? with a backslash to match them literally`],
        ["bash_output", { shell_id: "s1", wait_for: "*x" }, `wait_for "*x" is not a valid regular expression (/*x/: Nothing to repeat): escape special characters such as ( [ { * + ? with a backslash to match them literally`],
        ["bash_output", { shell_id: "s1", tail_lines: 0 }, "tail_lines must be a whole number, at least 1; got 0. Leave it out to read what is new since your last read."],
        ["bash_output", { shell_id: "s1", tail_lines: "ten" }, `invalid arguments for bash_output: tail_lines must be an integer; got "ten". bash_output takes shell_id (required), bash_id, tail_lines, filter, wait_for, wait_timeout.`],
        ["bash_output", { shell_id: "s1", tail_lines: 10_001 }, "tail_lines 10001 is over the maximum of 10000: a result carries 30000 characters at most, so ask for fewer lines, or narrow them with filter"],
        ["bash_output", { shellId: "s1" }, `invalid arguments for bash_output: unknown parameter "shellId" (did you mean shell_id?). bash_output takes shell_id (required), bash_id, tail_lines, filter, wait_for, wait_timeout.`],
        ["kill_bash", {}, "invalid arguments for kill_bash: shell_id is missing: the id bash returned for the background shell, such as s1. kill_bash takes shell_id (required)."],
        ["list_shells", { all: true }, `invalid arguments for list_shells: unknown parameter "all". list_shells takes no parameters: call it with {}.`],
        ["bash", { command: "ls", cwd: "/tmp", timout: 5 }, `invalid arguments for bash: unknown parameter "cwd"; unknown parameter "timout" (did you mean timeout?). bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows.`],
        ["bash", { command: "ls", timeout: 900_000 }, "timeout 900000 ms is over the maximum of 600000 ms (10 minutes): for a longer command, set run_in_background: true and wait for it with bash_output wait_for"],
        ["bash", { command: "" }, "command is empty: pass the command line to run, for example `npm test`"],
        ["bash", { command: "ls", workdir: "/no/such/dir" }, "working directory /no/such/dir does not exist: create it or pass an existing directory"],
        ["bash", { command: "echo \u0000" }, "command contains a NUL byte (\\0), which no process can receive: remove it"],
        ["bash", {}, "invalid arguments for bash: command is missing: the command line to run with bash -c. Quote paths that contain spaces. bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows."]
      ]
      for (const [tool, args, message] of cases) {
        const result = yield* server.call(tool, args)
        expect({ tool, args, ...result }).toMatchObject({ tool, args, isError: true, text: message })
      }
      // as the SDK's own schemas define a tool result and a tool list
      const raw = yield* Effect.promise(() => server.client.callTool({ name: "kill_bash", arguments: {} }))
      expect(CallToolResultSchema.parse(raw)).toMatchObject({ isError: true, content: [{ type: "text" }] })
      const listed = yield* Effect.promise(() => server.client.request({ method: "tools/list" }, ListToolsResultSchema))
      expect(listed.tools.every((t) => t.inputSchema.additionalProperties === false)).toBe(true)
      // still serving, nothing was started by the bad calls, and nothing but the protocol went to stdout
      expect((yield* server.call("list_shells")).text).toMatch(/^1 shell, 1 running:/)
      expectOnlyProtocol(server.stdoutLines)
    }))

  it.scopedLive("stops every shell, foreground ones too, when stdin closes, then exits 0", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "300ms"])
      yield* server.call("bash", { command: "sleep 30 & sleep 30 & wait", run_in_background: true })
      yield* server.call("bash", { command: "trap '' TERM; echo armed; sleep 30 & wait", run_in_background: true })
      yield* server.call("bash_output", { shell_id: "s2", wait_for: "armed" })
      // a foreground call in flight when the client goes away
      void server.client.callTool({ name: "bash", arguments: { command: "sleep 30" } }).catch(() => undefined)
      yield* eventually("the foreground command to start", () => server.sleeping() === 4)
      server.closeStdin()
      expect(yield* server.exited).toEqual({ code: 0, signal: null })
      expect(server.leftovers()).toEqual([])
    }))

  for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130], ["SIGHUP", 129]] as const) {
    it.scopedLive(`stops every shell on ${signal}, then exits ${code}`, () =>
      Effect.gen(function*() {
        const server = yield* mcpServer(["--grace", "300ms"])
        yield* server.call("bash", { command: "sleep 30 & wait", run_in_background: true })
        yield* server.call("bash", { command: "trap '' TERM HUP INT; echo armed; sleep 30 & wait", run_in_background: true })
        yield* server.call("bash_output", { shell_id: "s2", wait_for: "armed" })
        yield* eventually("both shells' sleeps to run", () => server.sleeping() === 2)
        server.signal(signal)
        expect(yield* server.exited).toEqual({ code, signal: null })
        expect(server.leftovers()).toEqual([])
      }))
  }

  it.scopedLive("when killed outright, its watcher stops the shells", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "300ms"])
      yield* server.call("bash", { command: "sleep 30 & wait", run_in_background: true })
      yield* eventually("the shell's sleep to run", () => server.sleeping() === 1)
      server.signal("SIGKILL")
      expect(yield* server.exited).toEqual({ code: null, signal: "SIGKILL" })
      yield* eventually("the watcher to stop the shells", () => server.leftovers().length === 0)
    }))

  it.scopedLive("stops a foreground command whose call the client cancels", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const controller = new AbortController()
      const call = server.client.callTool({ name: "bash", arguments: { command: "sleep 30" } }, undefined, { signal: controller.signal })
      const settled = call.then(() => "answered", () => "cancelled")
      yield* eventually("the command to start", () => server.sleeping() === 1)
      controller.abort()
      expect(yield* Effect.promise(() => settled)).toBe("cancelled")
      yield* eventually("the command to be stopped", () => server.leftovers().length === 0)
    }))

  it.scopedLive("a kill_bash the client cancels mid-grace still stops the shell; later calls answer and stdin EOF shuts down", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "1s"])
      yield* server.call("bash", { command: "trap '' TERM; sleep 30 & wait", run_in_background: true })
      yield* eventually("the shell to start: its trap is set", () => server.sleeping() === 1)
      const controller = new AbortController()
      const kill = server.client.callTool({ name: "kill_bash", arguments: { shell_id: "s1" } }, undefined, { signal: controller.signal })
      const settled = kill.then(() => "answered", () => "cancelled")
      yield* Effect.sleep(100)
      controller.abort()
      expect(yield* Effect.promise(() => settled)).toBe("cancelled")
      // the stop goes on without its caller: the grace, then SIGKILL
      yield* eventually("the stop to finish", () => server.leftovers().length === 0, 1_000 + 1_000 + 500)
      const again = yield* server.call("kill_bash", { shell_id: "s1" })
      // it joins the stop if that is still settling, or finds the shell ended
      expect(again.text).toMatch(/had already ended[\s\S]*killed by SIGKILL|escalated to SIGKILL/)
      const listed = yield* server.call("list_shells")
      expect(listed.text).toMatch(/s1 .*killed by SIGKILL/)
      server.closeStdin()
      expect((yield* server.exited).code).toBe(0)
    }))

  it.scopedLive("runs commands in --cwd unless a call gives workdir", () =>
    Effect.gen(function*() {
      const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-mcp-cwd-")))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true })))
      fs.mkdirSync(path.join(dir, "sub"))
      const server = yield* mcpServer(["--cwd", dir])
      expect((yield* server.call("bash", { command: "pwd" })).text).toMatch(new RegExp(`^${dir}\n`))
      expect((yield* server.call("bash", { command: "pwd", workdir: "sub" })).text).toMatch(new RegExp(`^${dir}/sub\n`))
    }))

  it.scopedLive("accepts a tool call without arguments", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      expect(yield* server.call("list_shells")).toMatchObject({
        isError: false,
        text: "No background shells. Start one with bash run_in_background: true."
      })
    }))
})
