/**
 * The control endpoint with a real registry, real shells and a real unix
 * socket, asked by the real client in the same process, and by raw HTTP
 * requests where the point is what the endpoint refuses. Every shell here is
 * one process (`exec`), or waits for its children, so nothing is orphaned
 * and these run outside a PID namespace too.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { Containment, Limits, ProcessTable, ShellRegistry } from "@corral/core"
import { ControlClient } from "@corral/core/ControlClient"
import { ControlServer, socketPath } from "@corral/core/ControlServer"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { kernelProcess, leftovers } from "./helpers.js"

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

/** One request to the socket, outside of corral's client. */
const rawRequest = (socket: string, method: string, route: string) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const request = http.request({ socketPath: socket, method, path: route }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (text: string) => (body += text))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body })))
    })
    request.on("error", (error) => resume(Effect.die(error)))
    request.end()
  })

const start = (command: string, owner = "agent") =>
  Effect.flatMap(ShellRegistry, (registry) => registry.start({ command }, { owner }))

/** Waits until the shell's retained output matches `pattern`. */
const printed = (id: string, pattern: RegExp) =>
  Effect.flatMap(ShellRegistry, (registry) =>
    registry.output(id, { mode: "all", waitFor: pattern.source, waitMs: 5_000 }))

describe("ControlServer", () => {
  it.live("listens on <stateDir>/supervisors/<pid>.sock, 0600 in a 0700 directory, and removes it on release", () =>
    Effect.gen(function*() {
      const stateDir = tempStateDir()
      const expected = path.join(stateDir, "supervisors", `${process.pid}.sock`)
      yield* Effect.scoped(Effect.gen(function*() {
        const served = Context.get(yield* Layer.build(supervisor(stateDir)), ControlServer)
        expect(served.path).toBe(expected)
        expect(socketPath(stateDir, process.pid)).toBe(expected)
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
      fs.writeFileSync(socketPath(stateDir, process.pid), "stale")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(supervisor(stateDir))
        expect(fs.statSync(socketPath(stateDir, process.pid)).isSocket()).toBe(true)
        const answer = yield* rawRequest(socketPath(stateDir, process.pid), "GET", "/v1/shells")
        expect(answer.status).toBe(200)
      }))
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

  it.live("refuses malformed ids and unknown shells; no route takes a pid", () =>
    withSupervisor((stateDir) =>
      Effect.gen(function*() {
        const shell = yield* start("sleep 30")
        const socket = socketPath(stateDir, process.pid)
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
      expect(fs.existsSync(socketPath(stateDir, process.pid))).toBe(false)
      fs.rmSync(stateDir, { recursive: true })
    }))
})
