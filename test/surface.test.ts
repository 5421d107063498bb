/**
 * `corral ls|show|logs|stop` end to end: real supervisors in child processes
 * (a registry and its control endpoint each), the built `corral` bin, and
 * /proc read directly to see what is left running.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { SupervisorProcess } from "./fixtures/surfaceProcesses.js"
import { carrying, corral, decodeListing, isAlive, piped, spawnCorral, stateDir, supervisor, waitFor, watcherOf } from "./fixtures/surfaceProcesses.js"

/**
 * A supervisor's watcher outlives it by a moment and is then reparented to
 * PID 1, which on the machines corral is built on never reaps: outside the
 * PID namespace `npm test` creates, every test here would leave zombies.
 */
const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"
const supervising = inPidNamespace ? describe : describe.skip

const listed = (dir: string) => Effect.map(corral(dir, ["ls", "--json"]), (done) => decodeListing(done.stdout).shells)

/** Waits until `corral ls --json` shows the shell with the status. */
const untilStatus = (dir: string, id: string, status: string) =>
  Effect.gen(function*() {
    const until = Date.now() + 10_000
    while (Date.now() < until) {
      const shell = (yield* listed(dir)).find((s) => s.id === id)
      if (shell?.info.status._tag === status) return shell
      yield* Effect.sleep(100)
    }
    return yield* Effect.dieMessage(`${id} never reached ${status}`)
  })

/** Rows of /proc/net/unix bound to `socket`: the listener, plus one per connection not yet accepted. */
const socketRows = (socket: string) => fs.readFileSync("/proc/net/unix", "utf8").split("\n").filter((l) => l.endsWith(` ${socket}`)).length

const tagsOf = (s: SupervisorProcess) => `${s.pid}:`

const rssMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

/** Asks to follow a shell's output, then never reads: the connection closes with the scope. */
const stalledFollower = (socket: string, id: string) =>
  Effect.acquireRelease(
    Effect.async<net.Socket>((resume) => {
      const connection = net.connect(socket, () => {
        connection.pause()
        connection.write(`GET /v1/shells/${id}/follow HTTP/1.1\r\nHost: corral\r\n\r\n`, () => resume(Effect.succeed(connection)))
      })
    }),
    (connection) => Effect.sync(() => connection.destroy())
  )

supervising("corral ls, show, logs and stop across supervisors", () => {
  it.scopedLive("ls shows every supervisor's shells in one table, with the glyph grammar and no colour when piped", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["echo hello; sleep 60", "exit 3"])
      const b = yield* supervisor(dir, "agent-b", ["sleep 60", "true"])
      yield* untilStatus(dir, a.id(2), "Exited")
      yield* untilStatus(dir, b.id(2), "Exited")

      const done = yield* corral(dir, ["ls"])
      expect(done.code).toBe(0)
      expect(done.stdout).not.toContain("\x1b")
      const lines = done.stdout.trimEnd().split("\n")
      expect(lines[0]).toMatch(/^\s+ID\s+SUPERVISOR\s+STATUS\s+ELAPSED\s+COMMAND$/)
      const row = (id: string) => lines.find((l) => l.includes(` ${id} `))
      expect(row(a.id(1))).toMatch(new RegExp(`^▶  ${a.id(1)} +${a.pid} agent-a +running +\\d+s +echo hello; sleep 60$`))
      expect(row(a.id(2))).toMatch(new RegExp(`^✗  ${a.id(2)} +${a.pid} agent-a +exited 3 +\\d+s +exit 3$`))
      expect(row(b.id(1))).toMatch(new RegExp(`^▶  ${b.id(1)} +${b.pid} agent-b +running +\\d+s +sleep 60$`))
      expect(row(b.id(2))).toMatch(new RegExp(`^✓  ${b.id(2)} +${b.pid} agent-b +exited 0 +\\d+s +true$`))
      expect(lines).toHaveLength(5)

      const shells = yield* listed(dir)
      expect(shells.map((s) => [s.id, s.reach]).sort()).toEqual(
        [a.id(1), a.id(2), b.id(1), b.id(2)].sort().map((id) => [id, "live"])
      )
    }))

  // an agent's command and its host's name, printed as they were, set the operator's title and clipboard (OSC 52),
  // cleared the screen, reordered text (U+202E) and faked a field with a newline
  it.scopedLive("what an agent named acts on no terminal: ls, show and stop print its escapes as text", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const command = "sleep 60 # \u001b]52;c;cHduZWQ=\u0007\u001b[2J\u202eexe.\nowner       root"
      const a = yield* supervisor(dir, "agent\u001b]0;pwned\u0007", [command])
      const acting = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/
      const shown = yield* corral(dir, ["show", a.id(1)])
      expect(shown.stdout).not.toMatch(acting)
      expect(shown.stdout).toContain("command     sleep 60 # \\e]52;c;cHduZWQ=\\x07\\e[2J\\u202eexe.\\nowner       root\n")
      expect(shown.stdout).toContain(`supervisor  ${a.pid} agent ]0;pwned\n`)
      expect(shown.stdout.split("\n").filter((line) => line.startsWith("owner"))).toHaveLength(1)
      const table = yield* corral(dir, ["ls"])
      expect(table.stdout).not.toMatch(acting)
      expect(table.stdout).toContain("sleep 60 #  ]52;c;cHduZWQ= [2J exe. owner       root\n")
      const stopped = yield* corral(dir, ["stop", a.id(1)])
      expect(stopped.code).toBe(0)
      expect(stopped.stdout).not.toMatch(acting)
    }))

  it.scopedLive("show prints the status and retained output; logs -f follows the output until the shell is stopped", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["echo hello; sleep 60"])
      const b = yield* supervisor(dir, "agent-b", ["i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done"])

      const shown = yield* corral(dir, ["show", a.id(1)])
      expect(shown.code).toBe(0)
      expect(shown.stdout).toMatch(new RegExp(`^${a.id(1)}  ▶ running  \\d+s\\ncommand     echo hello; sleep 60\\n`))
      expect(shown.stdout).toContain(`supervisor  ${a.pid} agent-a\n`)
      expect(shown.stdout).toContain(`pid         ${a.shells[0]!.pid} `)
      expect(shown.stdout).toMatch(/--- output: 6 bytes retained ---\nhello\n$/)
      expect((yield* corral(dir, ["logs", a.id(1)])).stdout).toBe("hello\n")

      const following = yield* spawnCorral(dir, ["logs", "-f", b.id(1)])
      yield* waitFor("live ticks", () => (/tick 30\n/.test(following.stdout()) ? true : undefined))
      const stopped = yield* corral(dir, ["stop", b.id(1)])
      expect(stopped.code).toBe(0)
      expect(stopped.stdout).toMatch(new RegExp(`^${b.id(1)} \\(i=0; while .*\\): stopped group ${b.shells[0]!.pid} \\((?:cgroup|pidns|procScan)\\) in \\d+ms: SIGTERM sufficed, \\d+ process(es)?\\n$`))
      const followed = yield* following.finished
      expect(followed.code).toBe(0)
      const ticks = followed.stdout.trimEnd().split("\n")
      expect(ticks.length).toBeGreaterThanOrEqual(30)
      expect(ticks).toEqual(ticks.map((_, i) => `tick ${i + 1}`))
      expect(carrying(tagsOf(b))).toEqual([])
      expect((yield* untilStatus(dir, b.id(1), "Killed")).info.status).toMatchObject({ by: "request" })
    }))

  it.scopedLive("logs and show into a pipe: a slow reader gets every byte, a reader that leaves ends them quietly", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const size = 256 * 1024
      const a = yield* supervisor(dir, "agent-a", [
        `head -c ${size} /dev/zero | tr '\\0' x; sleep 60`,
        "while :; do head -c 8192 /dev/zero | tr '\\0' y; sleep 0.05; done"
      ], { CORRAL_BUFFER_BYTES: String(4 * size) })
      // the header comes first, so it arrives whatever happens to the rest
      yield* Effect.repeat(corral(dir, ["show", a.id(1)]), {
        until: (shown) => shown.stdout.includes(`--- output: ${size} bytes retained ---`),
        schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))
      })
      const all = "x".repeat(size)

      const logs = yield* piped(dir, ["logs", a.id(1)], "{ sleep 1; cat; }")
      expect({ code: logs.code, stderr: logs.stderr, bytes: logs.read.length }).toEqual({ code: 0, stderr: "", bytes: size })
      expect(logs.read).toBe(all)
      const shown = yield* piped(dir, ["show", a.id(1)], "{ sleep 1; cat; }")
      expect({ code: shown.code, stderr: shown.stderr }).toEqual({ code: 0, stderr: "" })
      expect(shown.read).toMatch(new RegExp(`^${a.id(1)}  ▶ running`))
      expect(shown.read.endsWith(`--- output: ${size} bytes retained ---\n${all}\n`)).toBe(true)

      // the reader's end: EPIPE, which is no failure of corral's
      for (const [args, reader] of [[["logs", a.id(1)], "head -c 1000"], [["show", a.id(1)], "head -n 1"], [["logs", "-f", a.id(2)], "head -c 1000"]] as const) {
        const cut = yield* piped(dir, args, reader)
        expect({ args, code: cut.code, stderr: cut.stderr }).toEqual({ args, code: 0, stderr: "" })
      }
    }))

  it.scopedLive("followers that never read cost the supervisor no memory, also once they left; one that pauses skips ahead and is told how much", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["yes"])
      const samples = (seconds: number) =>
        Effect.forEach(Array.from({ length: seconds * 4 }), () => Effect.zipLeft(Effect.sync(() => rssMiB(a.pid)), Effect.sleep(250)))
      // once the flood has filled the buffer: the resting size
      yield* Effect.sleep(1_000)
      const baseline = Math.max(...(yield* samples(1)))
      const stalled = yield* Effect.scoped(Effect.gen(function*() {
        for (let i = 0; i < 4; i++) yield* stalledFollower(a.socket, "s1")
        return yield* samples(8)
      }))
      const after = yield* samples(4)
      const growth = (mib: ReadonlyArray<number>) => Math.round(Math.max(...mib) - baseline)
      console.log(`supervisor RSS ${Math.round(baseline)} MiB; with 4 stalled followers +${growth(stalled)} MiB, after they left +${growth(after)} MiB`)
      expect(growth(stalled)).toBeLessThan(64)
      expect(growth(after)).toBeLessThan(64)

      // a follower that pauses is told how much it skipped
      const paused = yield* piped(dir, ["logs", "-f", a.id(1)], "{ sleep 2; head -c 4000000; } | grep -m 1 'bytes skipped here'")
      expect(paused).toMatchObject({ code: 0, stderr: "" })
      expect(paused.read).toMatch(/^--- corral: \d+ bytes skipped here: this reader fell behind the output ---\n$/)
    }))

  it.scopedLive("a stop interrupted by Ctrl-C still runs to its end; the shell does not wedge in Stopping", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      // a long grace, so that a slow `corral ls` on a busy machine still sees it Stopping
      const a = yield* supervisor(dir, "agent-a", ["trap '' TERM; sleep 60 & wait"], { CORRAL_GRACE: "8s" })
      yield* waitFor("the shell's processes", () => (carrying(tagsOf(a)).length >= 2 ? true : undefined))
      const stopping = yield* spawnCorral(dir, ["stop", a.id(1)])
      yield* untilStatus(dir, a.id(1), "Stopping")
      stopping.child.kill("SIGINT")
      yield* stopping.finished
      yield* waitFor("the stop to end without its caller", () => (carrying(tagsOf(a)).length === 0 ? true : undefined), 8_000 + 1_000 + 2_000)
      expect((yield* untilStatus(dir, a.id(1), "Killed")).info.status).toMatchObject({ signal: "SIGKILL", by: "request" })
      const again = yield* corral(dir, ["stop", a.id(1)])
      expect(again.code).toBe(0)
      expect(again.stdout).toMatch(/had already ended/)
    }))

  it.scopedLive("stop --all stops every running shell of every supervisor, TERM-ignoring ones too, and nothing is left", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["sleep 60", "trap '' TERM; sleep 60 & wait"])
      const b = yield* supervisor(dir, "agent-b", ["sleep 60 & sleep 60 & wait", "true"])
      yield* untilStatus(dir, b.id(2), "Exited")

      const done = yield* corral(dir, ["stop", "--all"])
      expect(done.code).toBe(0)
      const lines = done.stdout.trimEnd().split("\n").sort()
      expect(lines).toHaveLength(3)
      expect(lines.find((l) => l.startsWith(`${a.id(1)} `))).toMatch(/: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: SIGTERM sufficed/)
      expect(lines.find((l) => l.startsWith(`${a.id(2)} `))).toMatch(/: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: escalated to SIGKILL/)
      expect(lines.find((l) => l.startsWith(`${b.id(1)} `))).toMatch(/: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: SIGTERM sufficed, 3 processes/)
      expect(carrying(tagsOf(a))).toEqual([])
      expect(carrying(tagsOf(b))).toEqual([])

      const table = yield* corral(dir, ["ls"])
      expect(table.stdout.split("\n").filter((l) => l.startsWith("■")).length).toBe(3)
      expect((yield* corral(dir, ["stop", "--all"])).stdout).toBe("no running shells\n")
    }))

  it.scopedLive("refuses a stop for a shell that does not exist, listing the ids that do", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["sleep 60"])
      const b = yield* supervisor(dir, "agent-b", ["sleep 60"])
      for (const id of [`${a.pid}:s9`, `${process.pid + 100000}:s1`]) {
        const refused = yield* corral(dir, ["stop", id])
        expect(refused.code).toBe(1)
        expect(refused.stderr).toContain(`no shell with id ${id} (known ids: `)
        expect(refused.stderr).toContain(a.id(1))
        expect(refused.stderr).toContain(b.id(1))
      }
      const malformed = yield* corral(dir, ["stop", "s1"])
      expect(malformed.code).toBe(125)
      expect(malformed.stderr).toContain("expected <supervisor pid>:<shell id>, like 4242:s1")
      const missing = yield* corral(dir, ["show"])
      expect(missing.code).toBe(125)
      expect(missing.stderr).toContain("show needs the id of a shell")
      // one line, as every usage error of corral's
      for (const refused of [malformed, missing]) expect(refused.stderr.split("\n")).toHaveLength(2)
      for (const shell of [...a.shells, ...b.shells]) expect(isAlive(shell.pid)).toBe(true)
    }))

  it.scopedLive("keeps the socket 0600 and the directory 0700, and removes the socket when the supervisor ends", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const supervisors = path.join(dir, "supervisors")
      const socket = yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* supervisor(dir, "agent-a", ["sleep 60"])
        // named by PID namespace and pid: supervisors of other namespaces share the directory
        expect(a.socket).toBe(path.join(supervisors, `${/\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))![1]}-${a.pid}.sock`))
        expect(fs.statSync(a.socket).isSocket()).toBe(true)
        expect(fs.statSync(a.socket).mode & 0o777).toBe(0o600)
        expect(fs.statSync(supervisors).mode & 0o777).toBe(0o700)
        expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
        return a.socket
      }))
      expect(fs.existsSync(socket)).toBe(false)
      expect(fs.readdirSync(supervisors)).toEqual([])
    }))

  it.scopedLive("a supervisor SIGKILLed while ls asks it: its shells show as orphaned, stop directly, and its watcher stops the rest", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const doomed = yield* supervisor(dir, "doomed", ["sleep 60", "sleep 61"])
      const steady = yield* supervisor(dir, "steady", ["sleep 60"])
      const watcher = yield* waitFor("the watcher", () => watcherOf(doomed.pid))
      yield* waitFor("the doomed supervisor's journal to list its shells", () =>
        doomed.shells.every((shell) => journalled(dir, doomed.pid, shell.tag)) ? true : undefined)
      // held still, the watcher cannot stop the orphans before ls sees them
      yield* Effect.acquireRelease(
        Effect.sync(() => process.kill(watcher, "SIGSTOP")),
        () => Effect.sync(() => isAlive(watcher) && process.kill(watcher, "SIGCONT"))
      )
      // held still, the supervisor accepts ls's connection but never answers it
      process.kill(doomed.pid, "SIGSTOP")
      const ls = yield* spawnCorral(dir, ["ls"])
      yield* waitFor("ls to connect", () => (socketRows(doomed.socket) >= 2 ? true : undefined))
      process.kill(doomed.pid, "SIGKILL")

      const seen = yield* ls.finished
      expect(seen.code).toBe(0)
      const row = (id: string) => seen.stdout.split("\n").find((l) => l.includes(` ${id} `))
      expect(row(doomed.id(1))).toMatch(new RegExp(`^▶  ${doomed.id(1)} +${doomed.pid} doomed \\(dead\\) +orphaned +\\d+s +sleep 60$`))
      expect(row(doomed.id(2))).toMatch(/orphaned +\d+s +sleep 61$/)
      expect(row(steady.id(1))).toMatch(/running +\d+s +sleep 60$/)

      const logs = yield* corral(dir, ["logs", doomed.id(2)])
      expect(logs.code).toBe(1)
      expect(logs.stderr).toContain(`held by its supervisor ${doomed.pid} (doomed), which died`)

      const stopped = yield* corral(dir, ["stop", doomed.id(1)])
      expect(stopped.code).toBe(0)
      expect(stopped.stdout).toMatch(new RegExp(`^${doomed.id(1)} \\(orphaned, sleep 60\\): stopped group ${doomed.shells[0]!.pid} \\((?:cgroup|pidns|procScan)\\) in \\d+ms: SIGTERM sufficed`))
      expect(carrying(doomed.shells[0]!.tag)).toEqual([])
      expect(isAlive(doomed.shells[1]!.pid)).toBe(true)

      process.kill(watcher, "SIGCONT")
      yield* waitFor("the watcher to stop the last orphan", () => (carrying(tagsOf(doomed)).length === 0 ? true : undefined))
      const after = yield* listed(dir)
      expect(after.map((s) => s.id)).toEqual([steady.id(1)])
    }))

  it.scopedLive("a supervisor that does not answer: its shells show from its journal, and a stop is refused with the reason", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const stuck = yield* supervisor(dir, "stuck", ["sleep 60"])
      // the journal is written shortly after a start, off its path: stop the supervisor once its shell is in it
      yield* waitFor("the stuck supervisor's journal to list its shell", () => (journalled(dir, stuck.pid, stuck.shells[0]!.tag) ? true : undefined))
      yield* Effect.acquireRelease(
        Effect.sync(() => process.kill(stuck.pid, "SIGSTOP")),
        () => Effect.sync(() => process.kill(stuck.pid, "SIGCONT"))
      )
      const seen = yield* corral(dir, ["ls"])
      expect(seen.code).toBe(0)
      expect(seen.stdout).toMatch(new RegExp(`^▶  ${stuck.id(1)} +${stuck.pid} stuck +no answer +\\d+s +sleep 60$`, "m"))
      expect(seen.stdout).toContain(`supervisor ${stuck.pid} (stuck) does not answer: it did not answer in time`)
      const refused = yield* corral(dir, ["stop", stuck.id(1)])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`supervisor ${stuck.pid} (stuck) of shell ${stuck.id(1)} is alive but does not answer`)
      expect(isAlive(stuck.shells[0]!.pid)).toBe(true)
    }))
})

/** Whether the journal of the supervisor with that pid lists a shell carrying `tag`. */
const journalled = (dir: string, pid: number, tag: string) => {
  const journals = path.join(dir, "supervisors")
  try {
    return fs.readdirSync(journals).some((name) =>
      name.endsWith(`-${pid}.json`) && fs.readFileSync(path.join(journals, name), "utf8").includes(tag)
    )
  } catch {
    return false
  }
}
