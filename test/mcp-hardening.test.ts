/**
 * `corral mcp` under untrusted input: raw lines a client should never send,
 * patterns that backtrack, commands too large to exec, and calls that are
 * invalid or cancelled. Each answer is short and says what to do. The server
 * serves the next request.
 */
import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { inPidNamespace } from "../packages/tools/test/helpers.js"
import type { McpProcess } from "./fixtures/mcpHarness.js"
import { corralBin, isRecord, mcpServer } from "./fixtures/mcpHarness.js"

const byId = (id: unknown) => (message: Record<string, unknown>) => message.id === id && !("method" in message)

/** An error a model reads: a few short lines, no stack frames, no dump of an Effect error. */
const expectShort = (text: string) => {
  expect(text.length, text.slice(0, 500)).toBeLessThan(400)
  expect(text.split("\n").length, text).toBeLessThanOrEqual(4)
  expect(text).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m)
  expect(text).not.toMatch(/"_tag"|\bCause\b|\bFiberId\b/)
}

/** Still serving: a call through the SDK client is answered. */
const stillServes = (server: McpProcess) =>
  Effect.gen(function*() {
    const listed = yield* server.call("list_shells")
    expect(listed.isError).toBe(false)
  })

describe.skipIf(!inPidNamespace)("corral mcp hardening (needs the PID namespace of npm test)", () => {
  it.scopedLive("ignores a blank line, answers a non-JSON line with a parse error, and serves what follows", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      yield* stillServes(server)
      server.send("\n   \r\n")
      server.send("this is not json\n")
      server.send(`{"jsonrpc":"2.0","id":"after-garbage","method":"ping"}\n`)
      expect(yield* server.message(byId("after-garbage"))).toEqual({ jsonrpc: "2.0", id: "after-garbage", result: {} })
      const errors = server.stdoutLines.map((line) => JSON.parse(line)).filter((m) => m.id === null)
      expect(errors).toEqual([{
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, message: `not JSON (Unexpected token 'h', "this is not json" is not valid JSON): send one JSON-RPC message per line` }
      }])
      yield* stillServes(server)
    }))

  it.scopedLive("takes string and fractional ids, and answers bad messages with the caller's id where it has one", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      server.send(`{"jsonrpc":"2.0","id":"abc","method":"tools/list"}\n`)
      server.send(`{"jsonrpc":"2.0","id":2.5,"method":"ping"}\n`)
      server.send(`{"jsonrpc":"2.0","id":"m","method":"no/such/method"}\n`)
      server.send(`null\n[]\n{"jsonrpc":"2.0","method":"@effect/rpc/Interrupt","params":{"requestId":"abc"}}\n`)
      server.send(`{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"rm_rf","arguments":{}}}\n`)
      expect(((yield* server.message(byId("abc"))).result as { tools: Array<unknown> }).tools).toHaveLength(5)
      expect(yield* server.message(byId(2.5))).toEqual({ jsonrpc: "2.0", id: 2.5, result: {} })
      expect(yield* server.message(byId("m"))).toMatchObject({ error: { code: -32601, message: expect.stringMatching(/^unknown method "no\/such\/method"/) } })
      expect(yield* server.message(byId("t"))).toMatchObject({ error: { code: -32602, message: expect.stringMatching(/^unknown tool "rm_rf": this server has bash, /) } })
      yield* stillServes(server)
    }))

  it.scopedLive("answers a line over the size limit and reads on", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      server.send(`{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"${"x".repeat(5 * 1024 * 1024)}"}}\n`)
      server.send(`{"jsonrpc":"2.0","id":"small","method":"ping"}\n`)
      expect(yield* server.message(byId("small"))).toEqual({ jsonrpc: "2.0", id: "small", result: {} })
      expect(yield* server.message((m) => m.id === null)).toMatchObject({
        error: { code: -32600, message: expect.stringMatching(/^a message of 52429\d\d characters is over the limit of 4194304/) }
      })
      yield* stillServes(server)
    }))

  // JSON.parse takes any depth; what recursed after it (encoding for the server, describing a bad argument)
  // overflowed the stack at about 2000 levels, and the server's reading of stdin died: nothing was answered after it
  it.scopedLive("answers a message nested thousands of levels deep with its id, drops such a notification, and reads on", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels)
      server.send(`{"jsonrpc":"2.0","id":"in-arguments","method":"tools/call","params":{"name":"bash","arguments":{"command":${nested(2000)}}}}\n`)
      server.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":${nested(100_000)}}}\n`)
      server.send(`[{"jsonrpc":"2.0","id":"in-batch","method":"ping","params":{"_meta":${nested(100_000)}}},{"jsonrpc":"2.0","id":"beside","method":"ping"}]\n`)
      server.send(`{"jsonrpc":"2.0","id":"within-the-limit","method":"tools/call","params":{"name":"bash","arguments":{"command":${nested(10)}}}}\n`)
      for (const id of ["in-arguments", "in-batch"]) {
        expect(yield* server.message(byId(id))).toEqual({
          jsonrpc: "2.0",
          id,
          error: { code: -32600, message: "a message nested over 64 levels deep: nest its values less deeply" }
        })
      }
      expect(yield* server.message(byId("beside"))).toEqual({ jsonrpc: "2.0", id: "beside", result: {} })
      // within the limit, the tool says what is wrong with the argument
      const within = (yield* server.message(byId("within-the-limit"))).result as { isError: boolean; content: Array<{ text: string }> }
      expect(within.isError).toBe(true)
      expect(within.content[0]!.text).toMatch(/^invalid arguments for bash: command must be a string/)
      expectShort(within.content[0]!.text)
      expect(server.stdoutLines.filter((line) => JSON.parse(line).id === null), "answers without an id").toEqual([])
      yield* stillServes(server)
    }))

  it.scopedLive("a filter that backtracks holds up nothing: (a+)+$ over a 30 KB line is answered, a backreference one is stopped", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      yield* server.call("bash", { command: "head -c 30000 /dev/zero | tr '\\0' a; echo b; echo ready; exec sleep 60", run_in_background: true })
      yield* server.call("bash_output", { shell_id: "s1", wait_for: "^ready$" })
      // V8's linear-time engine takes over from backtracking: an answer within the time limit
      const linear = yield* server.call("bash_output", { shell_id: "s1", filter: "(a+)+$", tail_lines: 5 })
      expect(linear).toMatchObject({ isError: false, text: expect.stringMatching(/^\(no matching lines\)\n\[status: running/) })
      // a backreference keeps it on the backtracking engine, until the time limit
      const [stopped, listed] = yield* Effect.all([
        Effect.timed(server.call("bash_output", { shell_id: "s1", filter: "^(a+)+\\1$", tail_lines: 5 })),
        Effect.delay(Effect.timed(server.call("list_shells")), "100 millis")
      ], { concurrency: 2 })
      expect(stopped[1]).toEqual({
        isError: true,
        meta: { error: "InvalidInput" },
        text: `filter "^(a+)+\\\\1$" took more than 2s to match and was stopped: simplify it, avoiding nested repetition such as (a+)+ or (.*)*, or read less output with tail_lines`
      })
      expect(Duration.toMillis(stopped[0])).toBeGreaterThanOrEqual(2_000)
      // answered while the match ran
      expect(Duration.toMillis(listed[0]) + 100).toBeLessThan(Duration.toMillis(stopped[0]))
      yield* stillServes(server)
    }))

  it.scopedLive("a command too large for exec (1 MB) is a one-line tool error, in the foreground and the background", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const command = `echo ${"x".repeat(1024 * 1024)}`
      const message =
        "the command is too large to run (E2BIG: over the system's limit for arguments and environment): write it to a script file and run that file"
      for (const background of [false, true]) {
        const result = yield* server.call("bash", { command, run_in_background: background })
        expect({ background, ...result }).toEqual({ background, isError: true, text: message, meta: { error: "SpawnFailed" } })
      }
      yield* stillServes(server)
      expect((yield* server.call("list_shells")).text).toBe("No background shells. Start one with bash run_in_background: true.")
    }))

  it.scopedLive("answers invalid calls of every tool, and an unknown tool, in a few short lines without stack frames", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const huge = "y".repeat(100_000)
      const calls: ReadonlyArray<readonly [string, unknown]> = [
        ["bash", {}],
        ["bash", { command: 5 }],
        ["bash", { command: ["ls", huge] }],
        ["bash", { command: "ls", timeout: "soon", run_in_background: "yes", workdir: 7 }],
        ["bash", { command: "ls", description: { huge } }],
        ["bash_output", {}],
        ["bash_output", { shell_id: 5 }],
        ["bash_output", { shell_id: "s1", tail_lines: "ten", filter: 3, wait_for: null, wait_timeout: -1 }],
        ["bash", { command: "ls", workdir: huge }],
        ["bash", { command: "ls", workdir: `/no/such/${"d".repeat(3_000)}` }],
        ["bash_output", { shell_id: "s1", filter: huge }],
        ["bash_output", { shell_id: huge }],
        ["bash_output", { shell_id: "s1", bash_id: huge }],
        ["bash_output", { shell_id: "s1", filter: `(${"x".repeat(900)}` }],
        ["bash_output", { shell_id: "s1", wait_for: 7 }],
        ["kill_bash", {}],
        ["kill_bash", { shell_id: ["s1"] }],
        ["kill_bash", { shell_id: huge }],
        ["list_shells", "not an object"],
        ["rm_rf", { path: "/" }],
        [huge, {}]
      ]
      for (const [i, [name, args]] of calls.entries()) {
        const id = `bad-${i}`
        server.send(JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } }) + "\n")
        const answer = yield* server.message(byId(id))
        const text = isRecord(answer.result)
          ? (answer.result.content as ReadonlyArray<{ readonly text: string }>).map((c) => c.text).join("")
          : String((answer.error as { readonly message: string }).message)
        const failed = isRecord(answer.error) || (isRecord(answer.result) && answer.result.isError === true)
        expect({ name: name.slice(0, 20), args: JSON.stringify(args).slice(0, 80), failed, text }).toMatchObject({ failed: true, text: expect.any(String) })
        expectShort(text)
      }
      yield* stillServes(server)
    }))

  it.scopedLive("sends no answer for a cancelled call, foreground or kill_bash, and serves on", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "1s"])
      yield* server.call("bash", { command: "trap '' TERM; sleep 30 & wait", run_in_background: true })
      server.send(`{"jsonrpc":"2.0","id":"fg","method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 30"}}}\n`)
      server.send(`{"jsonrpc":"2.0","id":"kill","method":"tools/call","params":{"name":"kill_bash","arguments":{"shell_id":"s1"}}}\n`)
      yield* Effect.sleep("300 millis")
      server.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"fg","reason":"user pressed Esc"}}\n`)
      server.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"kill"}}\n`)
      // a cancel of what is not in flight, or of nothing at all, is ignored
      server.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-asked"}}\n`)
      server.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"deep":[1,2]}}}\n`)
      server.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}\n`)
      expect(yield* server.message(byId("after"))).toEqual({ jsonrpc: "2.0", id: "after", result: {} })
      yield* Effect.sleep("2 seconds")
      const answered = server.stdoutLines.map((line) => JSON.parse(line)).filter((m) => m.id === "fg" || m.id === "kill")
      expect(answered).toEqual([])
      // nothing on stdout was long: no dump of an interrupted Cause
      for (const line of server.stdoutLines) expect(line.length).toBeLessThan(10_000)
      yield* stillServes(server)
    }))
})

/**
 * `corral mcp ARGS` started in a directory removed before it runs (an agent's
 * scratch worktree, deleted under it), sent `lines`; its stdout lines, stderr
 * and exit code once it has ended.
 */
const mcpInRemovedDirectory = (args: ReadonlyArray<string>, lines: ReadonlyArray<unknown>) =>
  Effect.async<{ readonly stdout: Array<Record<string, unknown>>; readonly stderr: string; readonly code: number | null }>((resume) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-removed-cwd-"))
    const child = spawn("sh", ["-c", `cd "$1" && rmdir "$1" && shift && exec "$@"`, "sh", dir, process.execPath, corralBin, "mcp", ...args], {
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text))
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    child.stdin.on("error", () => {})
    child.stdin.write(lines.map((line) => JSON.stringify(line) + "\n").join(""))
    // the last call is answered before stdin closes: an MCP client waits for its answers
    const timer = setTimeout(() => child.stdin.end(), 3000)
    child.once("close", (code) => {
      clearTimeout(timer)
      resume(Effect.succeed({ stdout: stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)), stderr, code }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const execFileAsync = promisify(execFile)

const initialize = [
  { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } },
  { jsonrpc: "2.0", method: "notifications/initialized" }
]

const registryInRemovedDirectory = fileURLToPath(new URL("./fixtures/registry-in-removed-cwd.mjs", import.meta.url))

describe("a directory removed under corral", () => {
  it.live("a registry there runs a shell without cwd in it, records where, and says why a pattern cannot be run: no crash", () =>
    Effect.gen(function*() {
      const { stdout } = yield* Effect.promise(() => execFileAsync(process.execPath, [registryInRemovedDirectory], { cwd: os.tmpdir(), timeout: 20_000 }))
      const result = JSON.parse(stdout)
      expect(result.cwd).toBe(`${result.removed} (deleted)`)
      expect(result.status).toEqual({ _tag: "Exited", code: 0 })
      // bash, and the cgroup wrapper's sh, say on stderr that they cannot name their directory; which of the two
      // pipes is read first is the kernel's choice
      const lines = result.text.split("\n").filter((line: string) => line !== "" && !/getcwd/.test(line))
      expect(lines).toEqual(["ran"])
      expect(result.filtered).toBe(
        "regular expression \"ran\" was not run: Node cannot start the thread that runs patterns in a process whose working directory was removed " +
          "(ENOENT: no such file or directory, uv_cwd): start this process from an existing directory"
      )
    }))


  it.live("corral mcp there says in one line that its directory is gone and how to go on, and exits 125: no internal error", () =>
    Effect.gen(function*() {
      const result = yield* mcpInRemovedDirectory([], initialize)
      expect(result.stderr).toMatch(/^corral: the current directory \(\/.*corral-removed-cwd-\w+ \(deleted\)\) no longer exists: start corral mcp from an existing directory, or pass --cwd DIR\n$/)
      expect(result.code).toBe(125)
    }))

  it.live("corral mcp there with --cwd serves in that directory", () =>
    Effect.gen(function*() {
      const call = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "bash", arguments: { command: "pwd" } } }
      const result = yield* mcpInRemovedDirectory(["--cwd", os.tmpdir()], [...initialize, call])
      const answer = result.stdout.find((m) => m.id === 2)
      expect(JSON.stringify(answer), result.stderr).toContain(`${fs.realpathSync(os.tmpdir())}\\n`)
      expect(result.code).toBe(0)
    }))
})

/** The TCP ports `pid` listens on, from its socket descriptors and the kernel's tables. */
const listeningPorts = (pid: number): Array<number> => {
  const inodes = new Set(fs.readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
    try {
      return [/^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? []].flat()
    } catch {
      return []
    }
  }))
  return ["tcp", "tcp6"].flatMap((table) =>
    fs.readFileSync(`/proc/${pid}/net/${table}`, "latin1").split("\n").slice(1).flatMap((line) => {
      const fields = line.trim().split(/\s+/)
      // local address, state 0A (LISTEN), inode
      return fields.length > 9 && fields[3] === "0A" && inodes.has(fields[9]!) ? [parseInt(fields[1]!.split(":")[1]!, 16)] : []
    })
  )
}

/** The watcher processes of `pid`: its children that run the watcher's main module. */
const watchersOf = (pid: number): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((child) => {
    try {
      const stat = fs.readFileSync(`/proc/${child}/stat`, "latin1")
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid && fs.readFileSync(`/proc/${child}/cmdline`, "latin1").includes("watcherMain")
    } catch {
      return false
    }
  })

describe.skipIf(!inPidNamespace)("SIGUSR1 (needs the PID namespace of npm test)", () => {
  it.scopedLive("opens no Node inspector in corral mcp or its watcher, which any local user could run code through; both serve on", () =>
    Effect.gen(function*() {
      const server = yield* mcpServer()
      const started = yield* server.call("bash", { command: "sleep 30", run_in_background: true })
      expect(started.isError).toBe(false)
      const watchers = watchersOf(server.pid)
      expect(watchers).toHaveLength(1)
      for (const pid of [server.pid, watchers[0]!]) process.kill(pid, "SIGUSR1")
      process.kill(watchers[0]!, "SIGUSR2")
      yield* Effect.sleep("500 millis")
      expect(listeningPorts(server.pid)).toEqual([])
      expect(listeningPorts(watchers[0]!)).toEqual([])
      expect(server.stderr()).not.toContain("Debugger listening")
      // the watcher lives on: a stray user signal does not cost the shells their crash safety
      expect(watchersOf(server.pid)).toEqual(watchers)
      yield* stillServes(server)
    }))
})
