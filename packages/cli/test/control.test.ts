/**
 * The control endpoint with a real registry, real shells and a real unix
 * socket, asked by the real client in the same process, and by raw HTTP
 * requests where the point is what the endpoint refuses. Every shell here is
 * one process (`exec`), or waits for its children, so nothing is orphaned
 * and these run outside a PID namespace too.
 */
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Containment, Limits, ProcessTable, ShellRegistry } from "@corral/core"
import { ControlServer, socketPath } from "@corral/core/ControlServer"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { isRoot, nameFor, otherUid, ownPidNamespace, supervisorEntry } from "../../core/test/fixtures/stateDir.js"
import { isPidAlive, kernelProcess, leftovers } from "../../core/test/helpers.js"
import { ControlClient } from "../src/internal/controlClient.js"

const base = Containment.layer().pipe(Layer.provideMerge(Layer.mergeAll(ProcessTable.layer, Limits.layerWith({ grace: Duration.seconds(1) }))))

const tempStateDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "corral-ctl-"))

/** A supervisor in this process: a registry without watcher or journal, and its control endpoint. */
const supervisor = (stateDir: string) =>
  ControlServer.layer.pipe(
    Layer.provideMerge(ShellRegistry.layer({ name: "test supervisor", stateDir, crashSafety: false })),
    Layer.provide(base)
  )

const client = (stateDir: string) => ControlClient.layer({ stateDir }).pipe(Layer.provide(base))

/** Runs `test` against a fresh state directory served by a supervisor in this process. */
const withSupervisor = <A, E>(test: (stateDir: string) => Effect.Effect<A, E, ShellRegistry | ControlServer | ControlClient>) =>
  Effect.suspend(() => {
    const stateDir = tempStateDir()
    return test(stateDir).pipe(
      Effect.provide(Layer.merge(supervisor(stateDir), client(stateDir))),
      Effect.ensuring(Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
    )
  })

const globalId = (id: string) => `${process.pid}:${id}`

/** This process's supervisor name: its socket is `<name>.sock`. */
const own = nameFor(process.pid)

/** One request to the socket, outside of corral's client. */
const rawRequest = (socket: string, method: string, route: string, json?: unknown) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const headers = json === undefined ? {} : { "content-type": "application/json" }
    const request = http.request({ socketPath: socket, method, path: route, headers }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (text: string) => (body += text))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body })))
    })
    request.on("error", (error) => resume(Effect.die(error)))
    request.end(json === undefined ? undefined : JSON.stringify(json))
  })

/**
 * A stdin request whose body is `{"text": "aaa…"}` with `chars` characters, written in 64 KiB pieces as a
 * client streams it, with its length declared or chunked; what the endpoint answered, or how it cut the request off.
 */
const largeStdin = (socket: string, id: string, chars: number, declare: boolean) =>
  Effect.async<{ readonly status?: number; readonly body?: string; readonly cut?: string }>((resume) => {
    const [head, tail] = [Buffer.from('{"text":"'), Buffer.from('"}')]
    const headers: Record<string, string> = { "content-type": "application/json" }
    if (declare) headers["content-length"] = String(head.length + chars + tail.length)
    const request = http.request({ socketPath: socket, method: "POST", path: `/v1/shells/${id}/stdin`, headers }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (text: string) => (body += text))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body })))
    })
    let ended = false
    request.on("error", (error: NodeJS.ErrnoException) => {
      ended = true
      resume(Effect.succeed({ cut: error.code ?? error.message }))
    })
    const piece = Buffer.alloc(64 * 1024, "a")
    let left = chars
    const writeRest = () => {
      while (!ended && left > 0) {
        const next = piece.subarray(0, Math.min(piece.length, left))
        left -= next.length
        if (!request.write(next)) return void request.once("drain", writeRest)
      }
      if (!ended) request.end(tail)
    }
    request.write(head)
    writeRest()
    return Effect.sync(() => request.destroy())
  })

const start = (command: string, owner = "agent") =>
  Effect.flatMap(ShellRegistry, (registry) => registry.start({ command }, { owner }))

/** Waits until the shell's retained output matches `pattern`. */
const printed = (id: string, pattern: RegExp) =>
  Effect.flatMap(ShellRegistry, (registry) =>
    registry.output(id, { mode: "all", waitFor: pattern.source, waitMs: 5_000 }))

describe("ControlServer", () => {
  it.live("listens on <stateDir>/supervisors/<pid namespace>-<pid>.sock, 0600 in a 0700 directory, and removes it on release", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      const expected = path.join(stateDir, "supervisors", `${ownPidNamespace}-${process.pid}.sock`)
      yield* Effect.scoped(Effect.gen(function*() {
        const served = Context.get(yield* Layer.build(supervisor(stateDir)), ControlServer)
        expect(served.path).toBe(expected)
        expect(socketPath(stateDir, own)).toBe(expected)
        const socket = fs.statSync(expected)
        expect(socket.isSocket()).toBe(true)
        expect(socket.mode & 0o777).toBe(0o600)
        expect(fs.statSync(path.dirname(expected)).mode & 0o777).toBe(0o700)
      }))
      expect(fs.existsSync(expected)).toBe(false)
      fs.rmSync(stateDir, { recursive: true })
    }))

  it.live("replaces a file left at its socket path by a dead process that had the same pid", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      fs.mkdirSync(path.join(stateDir, "supervisors"), { mode: 0o700 })
      fs.writeFileSync(socketPath(stateDir, own), "stale")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(supervisor(stateDir))
        expect(fs.statSync(socketPath(stateDir, own)).isSocket()).toBe(true)
        const answer = yield* rawRequest(socketPath(stateDir, own), "GET", "/v1/shells")
        expect(answer.status).toBe(200)
      }))
      fs.rmSync(stateDir, { recursive: true })
    }))

  it.live("replaces a link at its socket path without following it", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      const target = path.join(stateDir, "target")
      fs.writeFileSync(target, "precious")
      fs.mkdirSync(path.join(stateDir, "supervisors"), { mode: 0o700 })
      fs.symlinkSync(target, socketPath(stateDir, own))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(supervisor(stateDir))
        expect(fs.lstatSync(socketPath(stateDir, own)).isSocket()).toBe(true)
      }))
      expect(fs.readFileSync(target, "utf8")).toBe("precious")
      fs.rmSync(stateDir, { recursive: true })
    }))

  it.live("refuses a state directory too deep for a unix socket path, naming the fix", () =>
    Effect.gen(function*() {
      const stateDir = path.join(tempStateDir(), "x".repeat(100))
      const error = yield* Effect.flip(Effect.scoped(Layer.build(supervisor(stateDir))))
      expect(error._tag).toBe("ControlSocketError")
      expect(error.message).toContain("CORRAL_STATE_DIR")
      fs.rmSync(path.dirname(stateDir), { recursive: true })
    }))

  it.live("lists, shows and stops the registry's shells, whichever agent owns them", () =>
    withSupervisor(() =>
      Effect.gen(function*() {
        const control = yield* ControlClient
        const dev = yield* start("echo serving; exec sleep 30", "agent one")
        const other = yield* start("sleep 30", "agent two")
        yield* printed(dev.id, /serving/)

        const snapshot = yield* control.snapshot
        expect(snapshot.supervisors).toMatchObject([{ state: "live", supervisor: { pid: process.pid, name: "test supervisor" } }])
        expect(snapshot.shells.map((s) => [s.id, s.reach, s.info.owner, s.info.status._tag])).toEqual([
          [globalId(dev.id), "live", "agent one", "Running"],
          [globalId(other.id), "live", "agent two", "Running"]
        ])

        const shown = yield* control.show(globalId(dev.id))
        expect(shown.entry.info.command).toBe("echo serving; exec sleep 30")
        expect(shown.output).toEqual(Option.some({ text: "serving\n", dropped: 0 }))

        const stopped = yield* control.stop(globalId(dev.id))
        expect(stopped.wasActive).toBe(true)
        expect(stopped.report).toMatchObject({ pgid: dev.pid, escalated: false })
        expect(stopped.report.members).toBeGreaterThanOrEqual(1)
        expect(stopped.entry.info.status).toMatchObject({ _tag: "Killed", by: "request" })
        expect(leftovers({ pid: dev.pid, shellId: dev.tag })).toEqual([])

        const again = yield* control.stop(globalId(dev.id))
        expect(again.wasActive).toBe(false)

        const all = yield* control.stopAll
        expect(all.stopped.map((s) => s.entry.id)).toEqual([globalId(other.id)])
        expect(leftovers({ pid: other.pid, shellId: other.tag })).toEqual([])
      })
    ))

  it.live("follows the retained output, then live output to its end, without a gap or a repeat", () =>
    withSupervisor(() =>
      Effect.gen(function*() {
        const shell = yield* start("i=1; while [ $i -le 60 ]; do echo line $i; i=$((i+1)); sleep 0.01; done")
        yield* printed(shell.id, /line 10$/)
        const followed = yield* (yield* ControlClient).follow(globalId(shell.id)).pipe(
          Stream.decodeText(),
          Stream.mkString
        )
        const expected = Array.from({ length: 60 }, (_, i) => `line ${i + 1}\n`).join("")
        expect(followed).toBe(expected)
      })
    ))

  it.live("resizes a shell's terminal for the operator, whichever agent owns it; refuses a shell on pipes and a size out of bounds", () =>
    withSupervisor((stateDir) =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const control = yield* ControlClient
        // one `stty size` per line typed
        const term = yield* registry.start({ command: "while read -r line; do stty size; done", tty: { cols: 80, rows: 24 } }, { owner: "agent" })
        yield* control.resize(globalId(term.id), { cols: 70, rows: 20 })
        yield* registry.write(term.id, { text: "\n" }, { owner: "agent" })
        expect((yield* printed(term.id, /20 70/)).waited).toBe("matched")

        const piped = yield* start("exec sleep 30")
        const refused = yield* Effect.flip(control.resize(globalId(piped.id), { cols: 70, rows: 20 }))
        expect(refused.message).toBe(`shell ${globalId(piped.id)} has no terminal to resize: it was started without one (the bash tool's tty: true), or it has ended`)
        const socket = socketPath(stateDir, own)
        const raw = yield* rawRequest(socket, "POST", `/v1/shells/${piped.id}/resize`, { cols: 70, rows: 20 })
        expect({ status: raw.status, body: JSON.parse(raw.body) }).toMatchObject({ status: 409, body: { error: "NoTerminal" } })
        for (const size of [{ cols: 0, rows: 20 }, { cols: 70, rows: 1001 }, { cols: 70.5, rows: 20 }, { cols: 70 }]) {
          const bad = yield* rawRequest(socket, "POST", `/v1/shells/${term.id}/resize`, size)
          expect(bad.status, JSON.stringify(size)).toBe(400)
        }
        yield* registry.kill(term.id, { owner: "agent" })
        yield* registry.kill(piped.id, { owner: "agent" })
      })
    ))

  it.live("refuses malformed ids and unknown shells; no route takes a pid", () =>
    withSupervisor((stateDir) =>
      Effect.gen(function*() {
        const shell = yield* start("sleep 30")
        const socket = socketPath(stateDir, own)
        for (const id of ["1", String(shell.pid), "-1", "s0", "s1x", "..", "%2e%2e"]) {
          const answer = yield* rawRequest(socket, "POST", `/v1/shells/${id}/stop`)
          expect(answer.status, id).toBe(400)
          expect(JSON.parse(answer.body)).toMatchObject({ error: "InvalidShellId" })
        }
        const unknown = yield* rawRequest(socket, "POST", "/v1/shells/s99/stop")
        expect(unknown.status).toBe(404)
        expect(JSON.parse(unknown.body)).toMatchObject({ error: "UnknownShell", known: [shell.id] })
        expect((yield* rawRequest(socket, "POST", `/v1/pids/${shell.pid}/stop`)).status).toBe(404)
        expect(kernelProcess(shell.pid)?.state).not.toBe("Z")

        const control = yield* ControlClient
        const invalid = yield* Effect.flip(control.stop("s1"))
        expect(invalid._tag).toBe("InvalidShellId")
        expect(invalid.message).toContain("<supervisor pid>:<shell id>")
        const missing = yield* Effect.flip(control.stop(globalId("s99")))
        expect(missing).toMatchObject({ _tag: "NoSuchShell", known: [globalId(shell.id)] })
        expect(missing.message).toContain(globalId(shell.id))
      })
    ))

  // a body of 1 GiB, read whole, overflowed a string in the supervisor, and `corral mcp` died of it
  it.live("bounds a request's body at 1 MiB: a longer declared length is refused unread, an undeclared one is cut off, and the endpoint serves on", () =>
    withSupervisor((stateDir) =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const shell = yield* registry.start({ command: "exec wc -c", stdin: "pipe" }, { owner: "agent" })
        const socket = socketPath(stateDir, own)
        const declared = yield* largeStdin(socket, shell.id, 64 * 1024 * 1024, true)
        expect(declared.status).toBe(413)
        expect(JSON.parse(declared.body!)).toEqual({
          error: "RequestTooLarge",
          message: `a request body of ${64 * 1024 * 1024 + 11} bytes is over the limit of 1048576: send input in smaller parts`
        })
        const chunked = yield* largeStdin(socket, shell.id, 64 * 1024 * 1024, false)
        expect(chunked.status, "no answer: the connection is cut").toBeUndefined()
        expect(chunked.cut).toMatch(/^(ECONNRESET|EPIPE)$/)
        // what a client sends stays well within the bound
        const within = yield* largeStdin(socket, shell.id, 512 * 1024, false)
        expect(within.status).toBe(200)
        expect(JSON.parse(within.body!)).toMatchObject({ delivered: { _tag: "Written", chars: 512 * 1024 } })
        expect((yield* rawRequest(socket, "POST", `/v1/shells/${shell.id}/stdin`, { eof: true })).status).toBe(200)
        // the shell got the write within the bound, and nothing of the two refused
        const counted = yield* registry.output(shell.id, { mode: "all", waitFor: "\\d+", waitMs: 5_000 })
        expect(counted.text.trim()).toBe(String(512 * 1024))
      })
    ))

  // 3000 idle connections held every descriptor of a supervisor at `ulimit -n` 1024: no shell could start
  it.live("holds at most 128 connections open: those past it are closed as they come, and the endpoint serves once they go", () =>
    withSupervisor((stateDir) =>
      Effect.gen(function*() {
        const socket = socketPath(stateDir, own)
        const closedBy = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            let closed = 0
            const sockets = Array.from({ length: 300 }, () => net.connect(socket).on("error", () => undefined).once("close", () => closed++))
            await new Promise((resolve) => setTimeout(resolve, 1_000))
            return { sockets, closed }
          }),
          ({ sockets }) => Effect.sync(() => sockets.forEach((s) => s.destroy()))
        ).pipe(Effect.map(({ closed }) => closed), Effect.scoped)
        expect(closedBy).toBe(300 - 128)
        // the server counts a connection gone once it has seen it close: until then, one more may be refused
        const ask = Effect.catchAllDefect(rawRequest(socket, "GET", "/v1/shells"), (refused) => Effect.fail(refused))
        const after = yield* Effect.retry(ask, { times: 20, schedule: Schedule.spaced("50 millis") })
        expect(after.status).toBe(200)
      })
    ))

  it.live("shuts down while a follower is attached to a running shell", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      const follower = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(Layer.merge(supervisor(stateDir), client(stateDir)))
        const shell = yield* Effect.provide(start("echo up; exec sleep 30"), context)
        const received = yield* Deferred.make<void>()
        const follower = yield* Context.get(context, ControlClient).follow(globalId(shell.id)).pipe(
          Stream.decodeText(),
          Stream.tap(() => Deferred.succeed(received, undefined)),
          Stream.mkString,
          Effect.fork
        )
        yield* Deferred.await(received)
        return follower
      }))
      // the endpoint closes before the registry stops the shell: the follower is cut off, not left hanging
      const cut = yield* Effect.flip(Fiber.join(follower))
      expect(cut).toMatchObject({ _tag: "ControlError", reason: expect.stringContaining("connection was lost") })
      expect(fs.existsSync(socketPath(stateDir, own))).toBe(false)
      fs.rmSync(stateDir, { recursive: true })
    }))
})

/** A `sleep` in a group of its own carrying `tag`, killed with the scope. */
const taggedSleep = (tag: string, options: { readonly uid?: number } = {}) =>
  Effect.acquireRelease(
    Effect.async<ChildProcess>((resume) => {
      const child = spawn("sleep", ["30"], {
        stdio: "ignore",
        detached: true,
        env: { ...process.env, CORRAL_SHELL_ID: tag },
        ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid })
      })
      child.once("spawn", () => resume(Effect.succeed(child)))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

/** A pid no process has: one of ours that has exited and been reaped. */
const deadPid = Effect.async<number>((resume) => {
  const child = spawn("true", [], { stdio: "ignore" })
  child.once("exit", () => resume(Effect.succeed(child.pid!)))
})

const craft = (stateDir: string, supervisor: number, shells: ReadonlyArray<{ readonly id: string; readonly pid: number }>, pidns = ownPidNamespace) => {
  fs.mkdirSync(path.join(stateDir, "supervisors"), { recursive: true, mode: 0o700 })
  const file = path.join(stateDir, "supervisors", `${nameFor(supervisor, pidns)}.json`)
  const entry = {
    version: 2,
    supervisor: supervisorEntry(supervisor, { pidns }),
    shells: shells.map(({ id, pid }) => ({
      id,
      tag: `${supervisor}:${id}`,
      pid,
      leaderStartTime: startTimeOf(pid),
      bornAfter: startTimeOf(pid) - 1,
      command: "sleep 30",
      cwd: "/",
      owner: "crafted",
      startedAt: 0
    }))
  }
  fs.writeFileSync(file, JSON.stringify(entry), { mode: 0o600 })
  return file
}

const startTimeOf = (pid: number): number => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
}

/** A client alone on `stateDir`. */
const clientOn = (stateDir: string) => Effect.provide(ControlClient, client(stateDir))

describe("ControlClient in an untrusted state directory", () => {
  it.live("sets aside what is named like a control socket but is not one, and never connects to it", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = tempStateDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      fs.mkdirSync(path.join(stateDir, "supervisors"), { mode: 0o700 })
      const plain = socketPath(stateDir, nameFor(4242))
      fs.writeFileSync(plain, "not a socket")
      const snapshot = yield* Effect.flatMap(clientOn(stateDir), (c) => c.snapshot)
      expect(snapshot).toEqual({ supervisors: [], shells: [] })
      expect(fs.readdirSync(path.join(stateDir, "supervisors"))).toEqual([`${path.basename(plain)}.bad`])
    })))

  // a decode that refuses an answer describes it in its message, recursing as deep: thousands of levels overflowed the stack
  it.live("an answer nested thousands of levels deep is no answer: the socket is passed over, nothing crashes", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = tempStateDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      fs.mkdirSync(path.join(stateDir, "supervisors"), { mode: 0o700 })
      const planted = socketPath(stateDir, nameFor(process.pid))
      let requests = 0
      const server = http.createServer((_, response) => {
        requests++
        response.setHeader("content-type", "application/json")
        response.end(`{"supervisor":${"[".repeat(100_000)}${"]".repeat(100_000)},"shells":[]}`)
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(planted, () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const snapshot = yield* Effect.flatMap(clientOn(stateDir), (c) => c.snapshot)
      expect(requests).toBe(1)
      expect(snapshot).toEqual({ supervisors: [], shells: [] })
      // with a journal of a live supervisor, it shows as unreachable, saying why
      const journal = craft(stateDir, process.pid, [])
      const entry = JSON.parse(fs.readFileSync(journal, "utf8"))
      fs.writeFileSync(journal, JSON.stringify({ ...entry, supervisor: { ...entry.supervisor, startTime: startTimeOf(process.pid) } }))
      const again = yield* Effect.flatMap(clientOn(stateDir), (c) => c.snapshot)
      expect(again.supervisors).toMatchObject([{ state: "unreachable", supervisor: { pid: process.pid } }])
      expect(again.supervisors[0]!.problem).toMatch(/^its answer does not follow the v\d+ protocol: its values nest too deeply to describe \(Maximum call stack/)
    })))

  it.live.skipIf(!isRoot)("never talks to a socket of another user (as root: only root can give a socket away)", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = tempStateDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      fs.mkdirSync(path.join(stateDir, "supervisors"), { mode: 0o700 })
      const planted = socketPath(stateDir, nameFor(4243))
      let requests = 0
      const server = http.createServer((_, response) => {
        requests++
        response.end("{}")
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(planted, () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      fs.chownSync(planted, otherUid, otherUid)
      const snapshot = yield* Effect.flatMap(clientOn(stateDir), (c) => c.snapshot)
      expect(snapshot.supervisors).toEqual([])
      expect(requests).toBe(0)
    })))

  it.live.skipIf(!isRoot)("refuses a state directory of another user, naming it (as root: only root can give a directory away)", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      fs.chownSync(stateDir, otherUid, otherUid)
      const error = yield* Effect.flip(clientOn(stateDir))
      expect(error).toMatchObject({ _tag: "StateDirError", path: stateDir })
      expect(error.message).toContain(`belongs to uid ${otherUid}`)
      fs.rmSync(stateDir, { recursive: true })
    }))

  it.live("lists a supervisor of another PID namespace from its journal, and never stops its shells", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = tempStateDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      const supervisorPid = yield* deadPid
      const lookalike = yield* taggedSleep(`${supervisorPid}:s1`)
      const foreign = craft(stateDir, supervisorPid, [{ id: "s1", pid: lookalike.pid! }], ownPidNamespace + 1)

      const control = yield* clientOn(stateDir)
      const snapshot = yield* control.snapshot
      expect(snapshot.supervisors).toMatchObject([{ state: "unreachable", supervisor: { pid: supervisorPid } }])
      expect(snapshot.supervisors[0]!.problem).toContain(`it runs in another PID namespace (pid:[${ownPidNamespace + 1}]), so corral leaves its shells alone`)
      expect(snapshot.shells.map((s) => [s.id, s.reach])).toEqual([[`${supervisorPid}:s1`, "unreachable"]])
      expect(yield* Effect.flip(control.stop(`${supervisorPid}:s1`))).toMatchObject({ _tag: "SupervisorUnreachable" })
      expect((yield* control.stopAll).stopped).toEqual([])
      expect(isPidAlive(lookalike.pid!)).toBe(true)
      expect(fs.existsSync(foreign)).toBe(true)
    })))

  it.live("lists and stops a dead supervisor's orphans only where tag and uid match too", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = tempStateDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      const supervisorPid = yield* deadPid
      const orphan = yield* taggedSleep(`${supervisorPid}:s1`)
      const untagged = yield* taggedSleep("someone-else:s1")
      const otherUser = isRoot ? yield* taggedSleep(`${supervisorPid}:s3`, { uid: otherUid }) : undefined
      craft(stateDir, supervisorPid, [
        { id: "s1", pid: orphan.pid! },
        { id: "s2", pid: untagged.pid! },
        ...(otherUser === undefined ? [] : [{ id: "s3", pid: otherUser.pid! }])
      ])

      const control = yield* clientOn(stateDir)
      const snapshot = yield* control.snapshot
      expect(snapshot.shells.map((s) => [s.id, s.reach])).toEqual([[`${supervisorPid}:s1`, "orphaned"]])
      const all = yield* control.stopAll
      expect(all.stopped.map((s) => s.entry.id)).toEqual([`${supervisorPid}:s1`])
      expect(isPidAlive(untagged.pid!)).toBe(true)
      if (otherUser !== undefined) expect(isPidAlive(otherUser.pid!)).toBe(true)
    })))
})
