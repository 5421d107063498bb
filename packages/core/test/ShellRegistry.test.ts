/**
 * The registry with real processes, real signals and real time: output
 * modes, waiting on a pattern, dropped bytes, option errors, the status
 * model, ownership and failed starts.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ShellRegistry } from "@corral/core"
import type { InvalidOption, InvalidPattern, NotOwner, ShellStatus } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { environOf, inPidNamespace, kernelProcess, waitFor } from "./helpers.js"
import {
  awaitEvent,
  eventsOf,
  eventually,
  idOf,
  isRunning,
  nothingLeft,
  ownShellPrefix,
  recordEvents,
  registryLayer,
  commandProcesses,
  taggedProcesses,
  tempStateDir
} from "./fixtures/registry/harness.js"

const owner = "registry-test"
// Shells here end in `exec` or run no background child, so killing one
// orphans nothing; the one test that must orphan needs the PID namespace.
const sleeper = { command: ["sleep", "300"] }
/** Waiting on it returns when the shell ends. */
const neverMatches = "^this line is never printed$"

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

const statusOf = (id: string) => Effect.flatMap(ShellRegistry, (registry) => Effect.map(registry.info(id), (info) => info.status))

/** Waits until shell `id` reaches a status with tag `tag`. */
const awaitStatus = <T extends ShellStatus["_tag"]>(id: string, tag: T) =>
  eventually(
    `status ${tag} of ${id}`,
    Effect.map(statusOf(id), (status) => (status._tag === tag ? (status as Extract<ShellStatus, { _tag: T }>) : undefined))
  )

describe("tracing", () => {
  it.live("start and kill are spans of a traced caller's span, and a bare call makes none", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const native = yield* Effect.tracer
      const spans: Array<string> = []
      const recording = Tracer.make({
        span: (name, parent, ...rest) => {
          const under = Option.match(parent, { onNone: () => "root", onSome: (p) => (p._tag === "Span" ? p.name : "external") })
          spans.push(`${name} under ${under}`)
          return native.span(name, parent, ...rest)
        },
        context: native.context
      })
      const startThenKill = Effect.flatMap(registry.start(sleeper, { owner }), (info) => registry.kill(info.id, { owner }))
      yield* Effect.withTracer(startThenKill, recording)
      expect(spans).toEqual([])
      yield* Effect.withTracer(Effect.withSpan(startThenKill, "caller"), recording)
      expect(spans).toEqual(["caller under root", "ShellRegistry.start under caller", "ShellRegistry.kill under caller"])
    }).pipe(Effect.provide(registryLayer())))
})

describe("start, info and list", () => {
  it.live("returns at once with the shell's id, pid, command, cwd, name, owner and start time", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const cwd = fs.realpathSync(os.tmpdir())
      const before = Date.now()
      const info = yield* registry.start({ command: "exec sleep 300", cwd }, { owner, name: "dev server" })
      expect(info).toMatchObject({
        id: "s1",
        tag: `${process.pid}:s1`,
        command: "exec sleep 300",
        cwd,
        name: "dev server",
        owner,
        status: { _tag: "Running" }
      })
      expect(info.startedAt).toBeGreaterThanOrEqual(before)
      expect(info.startedAt).toBeLessThanOrEqual(Date.now())
      // read while the wrapper execs the command, `environ` can be empty for a moment: the tag is there once it has
      expect(yield* waitFor("the leader's environment", () => environOf(info.pid).get("CORRAL_SHELL_ID"))).toBe(info.tag)
      expect(kernelProcess(info.pid)).toMatchObject({ pgid: info.pid, sid: info.pid })
      expect(yield* registry.list).toEqual([info])
      expect(yield* registry.info(info.id)).toEqual(info)
    }).pipe(Effect.provide(registryLayer())))

  it.live("fails on an unknown id, for every operation, listing the ids that exist", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const known = yield* registry.start(sleeper, { owner })
      for (
        const attempt of [registry.info("s99"), registry.output("s99"), registry.kill("s99", { owner }), Effect.scoped(registry.follow("s99"))]
      ) {
        const error = yield* Effect.flip(attempt as Effect.Effect<unknown, { readonly _tag: string; readonly message: string }>)
        expect(error).toMatchObject({ _tag: "UnknownShell", id: "s99", known: [known.id] })
        expect(error.message).toContain(`known ids: ${known.id}`)
      }
    }).pipe(Effect.provide(registryLayer())))
})

describe("output", () => {
  const script = "echo one; echo two; echo three; sleep 0.3; echo four; exec sleep 300"

  it.live("`new` gives each reader only what arrived since its own last read", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: script }, { owner })
      const first = yield* registry.output(shell.id, { waitFor: "^three$", waitMs: 10_000 })
      expect(first).toMatchObject({ text: "one\ntwo\nthree\n", waited: "matched", dropped: 0 })
      expect((yield* registry.output(shell.id)).text).toBe("")
      expect((yield* registry.output(shell.id, { waitFor: "^four$", waitMs: 10_000 })).text).toBe("four\n")
      expect((yield* registry.output(shell.id, { mode: "new" })).text).toBe("")

      const other = yield* registry.output(shell.id, { reader: "other" })
      expect(other.text).toBe("one\ntwo\nthree\nfour\n")
      expect((yield* registry.output(shell.id, { reader: "other" })).text).toBe("")
      expect(other.info).toMatchObject({ id: shell.id, status: { _tag: "Running" } })
    }).pipe(Effect.provide(registryLayer())))

  it.live("`tail` gives the last lines, `all` everything retained, and neither moves a reader's cursor", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: script }, { owner })
      yield* registry.output(shell.id, { reader: "waiter", waitFor: "^four$", waitMs: 10_000 })
      expect((yield* registry.output(shell.id, { mode: "tail", lines: 2 })).text).toBe("three\nfour\n")
      expect((yield* registry.output(shell.id, { mode: "tail", lines: 1 })).text).toBe("four\n")
      expect((yield* registry.output(shell.id, { mode: "tail", lines: 100 })).text).toBe("one\ntwo\nthree\nfour\n")
      expect((yield* registry.output(shell.id, { mode: "all" })).text).toBe("one\ntwo\nthree\nfour\n")
      expect((yield* registry.output(shell.id)).text).toBe("one\ntwo\nthree\nfour\n")
    }).pipe(Effect.provide(registryLayer())))

  it.live("a filter keeps only matching lines, in every mode", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: script }, { owner })
      yield* registry.output(shell.id, { reader: "waiter", waitFor: "^four$", waitMs: 10_000 })
      expect((yield* registry.output(shell.id, { mode: "all", filter: "^t" })).text).toBe("two\nthree\n")
      expect((yield* registry.output(shell.id, { mode: "tail", lines: 3, filter: "o" })).text).toBe("two\nfour\n")
      expect((yield* registry.output(shell.id, { filter: "o" })).text).toBe("one\ntwo\nfour\n")
      // the filtered read still consumed everything up to here
      expect((yield* registry.output(shell.id)).text).toBe("")
    }).pipe(Effect.provide(registryLayer())))

  it.live("captures stderr along with stdout", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo to-stdout; echo to-stderr >&2" }, { owner })
      expect((yield* registry.output(shell.id, { waitFor: neverMatches })).waited).toBe("exited")
      const lines = (yield* registry.output(shell.id, { mode: "all" })).text.split("\n").sort()
      expect(lines).toEqual(["", "to-stderr", "to-stdout"])
    }).pipe(Effect.provide(registryLayer())))

  it.live("rejects an invalid regular expression, naming it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start(sleeper, { owner })
      const badFilter = yield* Effect.flip(registry.output(shell.id, { filter: "(unclosed" }))
      expect(badFilter).toMatchObject({ _tag: "InvalidPattern", pattern: "(unclosed" } satisfies Partial<InvalidPattern>)
      expect(badFilter.message).toContain(`"(unclosed"`)
      const badWait = yield* Effect.flip(registry.output(shell.id, { waitFor: "[a-", waitMs: 5_000 }))
      expect(badWait).toMatchObject({ _tag: "InvalidPattern", pattern: "[a-" })
      expect(badWait.message).toContain(`"[a-"`)
    }).pipe(Effect.provide(registryLayer())))

  it.live("rejects lines below 1, an unknown mode and a negative wait, naming the value", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start(sleeper, { owner })
      for (const lines of [0, -3, 1.5]) {
        const error = yield* Effect.flip(registry.output(shell.id, { mode: "tail", lines }))
        expect(error).toMatchObject({ _tag: "InvalidOption", option: "lines", value: lines } satisfies Partial<InvalidOption>)
        expect(error.message).toContain(`invalid lines: ${lines}`)
      }
      const mode = yield* Effect.flip(registry.output(shell.id, { mode: "everything" as "all" }))
      expect(mode).toMatchObject({ _tag: "InvalidOption", option: "mode", value: "everything" })
      const waitMs = yield* Effect.flip(registry.output(shell.id, { waitFor: "x", waitMs: -1 }))
      expect(waitMs).toMatchObject({ _tag: "InvalidOption", option: "waitMs", value: -1 })
    }).pipe(Effect.provide(registryLayer())))
})

describe("follow", () => {
  it.live("streams the shell's output as it arrives and ends when the output ends", () =>
    Effect.scoped(Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const gate = path.join(path.dirname(yield* tempStateDir), "go")
      const shell = yield* registry.start({ command: `while [ ! -e '${gate}' ]; do sleep 0.02; done; echo a; echo b >&2; echo c` }, { owner })
      const following = yield* Effect.fork(Stream.runCollect(yield* registry.follow(shell.id)))
      fs.writeFileSync(gate, "")
      const chunks = Array.from(yield* Fiber.join(following))
      expect(chunks.map((c) => Buffer.from(c.bytes).toString()).join("").split("\n").sort()).toEqual(["", "a", "b", "c"])
      expect(new Set(chunks.map((c) => c.stream))).toEqual(new Set(["stdout", "stderr"]))
      // after the end, following gives an empty stream at once
      expect(Array.from(yield* Stream.runCollect(yield* registry.follow(shell.id)))).toEqual([])
    })).pipe(Effect.provide(registryLayer())))
})

describe("waitFor", () => {
  it.live("returns once a line printed later matches", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo booting; sleep 0.5; echo listening on port 3000; exec sleep 300" }, { owner })
      const result = yield* registry.output(shell.id, { waitFor: "listening on port \\d+", waitMs: 10_000 })
      expect(result.waited).toBe("matched")
      expect(result.text).toBe("booting\nlistening on port 3000\n")
      expect(result.info.status).toEqual({ _tag: "Running" })
    }).pipe(Effect.provide(registryLayer())))

  it.live("says the shell exited when it ends without a match", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo starting; sleep 0.3; exit 3" }, { owner })
      const result = yield* registry.output(shell.id, { waitFor: "ready", waitMs: 10_000 })
      expect(result).toMatchObject({ waited: "exited", text: "starting\n", info: { status: { _tag: "Exited", code: 3 } } })
      // on a shell that already ended, the answer comes at once
      expect((yield* registry.output(shell.id, { waitFor: "ready", waitMs: 10_000 })).waited).toBe("exited")
    }).pipe(Effect.provide(registryLayer())))

  it.live("says the time ran out when nothing matches in time", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo ready; exec sleep 300" }, { owner })
      expect((yield* registry.output(shell.id, { waitFor: "^ready$", waitMs: 10_000 })).waited).toBe("matched")
      // the line was read: it does not match again
      const again = yield* registry.output(shell.id, { waitFor: "^ready$", waitMs: 200 })
      expect(again).toMatchObject({ waited: "timeout", text: "", info: { status: { _tag: "Running" } } })
      // another reader has not read it yet
      expect((yield* registry.output(shell.id, { reader: "other", waitFor: "^ready$", waitMs: 200 })).waited).toBe("matched")
    }).pipe(Effect.provide(registryLayer())))
})

describe("dropped bytes", () => {
  const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}\n`).join("")

  it.live("counts what overflowed a small buffer before the reader saw it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo first; sleep 0.2; seq 1 2000" }, { owner })
      const first = yield* registry.output(shell.id, { waitFor: "^first$", waitMs: 10_000 })
      expect(first).toMatchObject({ text: "first\n", dropped: 0 })
      expect((yield* registry.output(shell.id, { reader: "waiter", waitFor: neverMatches })).waited).toBe("exited")

      const total = Buffer.byteLength(lines(1, 2000))
      const rest = yield* registry.output(shell.id)
      expect(Buffer.byteLength(rest.text)).toBe(1024)
      expect(rest.text.endsWith("1999\n2000\n")).toBe(true)
      expect(rest.dropped).toBe(total - 1024)
      // a reader that saw nothing missed the first line too
      const fresh = yield* registry.output(shell.id, { reader: "fresh" })
      expect(fresh.dropped).toBe("first\n".length + total - 1024)
      expect((yield* registry.output(shell.id)).dropped).toBe(0)
      expect((yield* registry.output(shell.id, { mode: "all" })).dropped).toBe(fresh.dropped)
    }).pipe(Effect.provide(registryLayer({ limits: { bufferBytes: 1024 } }))))
})

describe("status", () => {
  it.live("is Exited with the code when the shell ends by itself", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start({ command: "exit 7" }, { owner })
      const exited = yield* awaitEvent(seen, shell.id, "Exited")
      expect(exited.info.status).toEqual({ _tag: "Exited", code: 7 })
      expect(exited.info.endedAt).toBeGreaterThanOrEqual(shell.startedAt)
      expect(yield* registry.info(shell.id)).toEqual(exited.info)
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))

  it.live("is Killed by SIGTERM at the owner's request, with the stop report", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start(sleeper, { owner })
      const report = yield* registry.kill(shell.id, { owner })
      expect(report).toMatchObject({ pgid: shell.pid, escalated: false, members: 1, survivors: [] })
      expect(report.signals.SIGTERM).toBeGreaterThan(0)
      expect(yield* statusOf(shell.id)).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "request" })
      const killed = yield* awaitEvent(seen, shell.id, "Killed")
      expect(killed.report).toEqual(report)
      expect(isRunning(shell.pid)).toBe(false)
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))

  it.live("is Stopping while a shell that ignores SIGTERM waits out the grace, then Killed by SIGKILL", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "trap '' TERM; echo armed; exec sleep 300" }, { owner })
      expect((yield* registry.output(shell.id, { waitFor: "^armed$", waitMs: 10_000 })).waited).toBe("matched")
      const killing = yield* Effect.fork(registry.kill(shell.id, { owner }))
      expect(yield* awaitStatus(shell.id, "Stopping")).toEqual({ _tag: "Stopping", by: "request" })
      expect(isRunning(shell.pid)).toBe(true)
      const report = yield* Fiber.join(killing)
      expect(report.escalated).toBe(true)
      expect(report.signals.SIGKILL).toBeGreaterThan(0)
      expect(yield* statusOf(shell.id)).toEqual({ _tag: "Killed", signal: "SIGKILL", by: "request" })
    }).pipe(Effect.provide(registryLayer({ limits: { grace: Duration.seconds(1) } }))))

  it.live("is Killed by the lifetime when the shell outlives it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start(sleeper, { owner })
      const killed = yield* awaitEvent(seen, shell.id, "Killed")
      expect(killed.info.status).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "lifetime" })
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { lifetime: Duration.millis(300) } }))))

  it.live("is Killed by shutdown when the registry is released", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const registry = Context.get(yield* Layer.buildWithScope(registryLayer(), scope), ShellRegistry)
      const seen = yield* recordEvents(registry)
      const shells = yield* Effect.forEach([1, 2], () => registry.start(sleeper, { owner }))
      yield* Scope.close(scope, Exit.void)
      for (const shell of shells) {
        const killed = yield* awaitEvent(seen, shell.id, "Killed")
        expect(killed.info.status).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "shutdown" })
        expect(isRunning(shell.pid)).toBe(false)
      }
    }).pipe(Effect.scoped))

  it.live("is Killed without `by` when the signal came from outside corral", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start(sleeper, { owner })
      process.kill(shell.pid, "SIGKILL")
      const ended = yield* awaitEvent(seen, shell.id, "Exited")
      expect(ended.info.status).toMatchObject({ _tag: "Killed", signal: "SIGKILL" })
      expect((ended.info.status as Extract<ShellStatus, { _tag: "Killed" }>).by).toBeUndefined()
      expect(eventsOf(seen, shell.id)).toEqual(["Started", "Exited"])
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))

  it.live.skipIf(!inPidNamespace)(
    "is Lingering with the member count when the leader exited but its group runs on, and kill still stops them (orphans a sleep on purpose: needs the PID namespace of `npm test`)",
    () =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const shell = yield* registry.start({ command: "sleep 300 & sleep 300 & echo started" }, { owner })
        const lingering = yield* awaitStatus(shell.id, "Lingering")
        expect(lingering).toEqual({ _tag: "Lingering", exit: { _tag: "Exited", code: 0 }, members: 2 })
        // the two background children (each may still be a forked `sh` about to exec `sleep`)
        expect(commandProcesses(shell)).toHaveLength(2)
        const report = yield* registry.kill(shell.id, { owner })
        expect(report.members).toBe(2)
        expect(yield* statusOf(shell.id)).toMatchObject({ _tag: "Killed", by: "request" })
        expect(taggedProcesses(shell.tag)).toEqual([])
      }).pipe(Effect.provide(registryLayer()))
  )
})

describe("shutdown", () => {
  it.live("stops every shell, ends the event streams after its events, runs once however often called, and refuses starts after it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const subscribed = yield* Effect.fork(Stream.runCollect(yield* registry.subscribe))
      const viaEvents = yield* Effect.fork(Stream.runCollect(registry.events))
      // `events` subscribes when its stream starts, on the forked fiber
      yield* Effect.sleep("50 millis")
      const shells = yield* Effect.forEach([1, 2], () => registry.start(sleeper, { owner }))
      yield* Effect.all([registry.shutdown, registry.shutdown], { concurrency: 2 })
      for (const fiber of [subscribed, viaEvents]) {
        const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
        expect(events.map((e) => `${e._tag} ${idOf(e)}`)).toEqual(["Started s1", "Started s2", "Killed s1", "Killed s2"])
        expect(events.slice(2).map((e) => e._tag === "Killed" && e.info.status)).toEqual([
          { _tag: "Killed", signal: "SIGTERM", by: "shutdown" },
          { _tag: "Killed", signal: "SIGTERM", by: "shutdown" }
        ])
      }
      for (const shell of shells) expect(isRunning(shell.pid)).toBe(false)
      expect((yield* Effect.flip(registry.start(sleeper, { owner })))._tag).toBe("RegistryClosed")
      // subscribed after the end: empty streams, not ones that wait forever
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(registry.events))).toEqual([])
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(yield* registry.subscribe))).toEqual([])
      // the layer's release, after this, has nothing left to do
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))
})

describe("limits from the environment", () => {
  it.live("layerConfig reads CORRAL_MAX_SHELLS and the other limits through Config", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const env = new Map([["CORRAL_MAX_SHELLS", "2"], ["CORRAL_GRACE", "200ms"]])
      const refused = yield* Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const shells = yield* Effect.forEach([1, 2], () => registry.start({ command: "trap '' TERM; echo armed; exec sleep 300" }, { owner }))
        for (const shell of shells) yield* registry.output(shell.id, { waitFor: "^armed$", waitMs: 10_000 })
        const refused = yield* Effect.flip(registry.start(sleeper, { owner }))
        // the grace from the environment: a TERM-ignoring shell is SIGKILLed after 200 ms, not 3 s
        const report = yield* registry.kill(shells[0]!.id, { owner })
        expect(report.escalated).toBe(true)
        expect(report.durationMs).toBeLessThan(3_000)
        return refused
      }).pipe(
        Effect.provide(ShellRegistry.layerConfig({ name: owner, stateDir })),
        Effect.withConfigProvider(ConfigProvider.fromMap(env))
      )
      expect(refused).toMatchObject({ _tag: "TooManyShells", limit: 2 })
    })))
})

describe("failed starts", () => {
  it.live("return the error from start and register nothing", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const missing = yield* Effect.flip(registry.start({ command: ["/nonexistent/corral-test-binary"] }, { owner }))
      expect(missing).toMatchObject({ _tag: "SpawnError", file: "/nonexistent/corral-test-binary", code: "ENOENT" })
      expect(missing.message).toContain("/nonexistent/corral-test-binary")
      const badCwd = yield* Effect.flip(registry.start({ command: "true", cwd: "/nonexistent/corral-test-dir" }, { owner }))
      expect(badCwd).toMatchObject({ _tag: "InvalidCwd", cwd: "/nonexistent/corral-test-dir", reason: "missing" })
      const empty = yield* Effect.flip(registry.start({ command: "  " }, { owner }))
      expect(empty._tag).toBe("EmptyCommand")
      expect(yield* registry.list).toEqual([])
      expect(seen).toEqual([])

      const next = yield* registry.start(sleeper, { owner })
      expect(next.status).toEqual({ _tag: "Running" })
      expect((yield* registry.list).map((s) => s.id)).toEqual([next.id])
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))
})

describe("ownership", () => {
  it.live("refuses a kill from another owner, but lets every owner read the output", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "echo hello; exec sleep 300" }, { owner: "alice" })
      const refused = yield* Effect.flip(registry.kill(shell.id, { owner: "bob" }))
      expect(refused).toMatchObject({ _tag: "NotOwner", id: shell.id, owner: "alice", caller: "bob" } satisfies Partial<NotOwner>)
      expect(refused.message).toContain(`"alice"`)
      expect(refused.message).toContain(`"bob"`)
      expect(yield* statusOf(shell.id)).toEqual({ _tag: "Running" })
      expect(isRunning(shell.pid)).toBe(true)

      const read = yield* registry.output(shell.id, { reader: "bob", waitFor: "^hello$", waitMs: 10_000 })
      expect(read).toMatchObject({ waited: "matched", text: "hello\n", info: { owner: "alice" } })
      yield* registry.kill(shell.id, { owner: "alice" })
      expect(yield* statusOf(shell.id)).toMatchObject({ _tag: "Killed", by: "request" })
    }).pipe(Effect.provide(registryLayer())))
})

describe("stdin", () => {
  it.live("takes many writes without adding a listener at each: no MaxListenersExceededWarning, and every line arrives", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
      yield* Effect.acquireRelease(
        Effect.sync(() => process.on("warning", onWarning)),
        () => Effect.sync(() => process.off("warning", onWarning))
      )
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "cat", stdin: "pipe" }, { owner })
      // before, each write left an `error` listener on the shell's stdin, and the eleventh made Node warn
      for (let i = 1; i <= 20; i++) yield* registry.write(shell.id, { text: `line ${i}\n` }, { owner })
      yield* registry.write(shell.id, { eof: true }, { owner })
      yield* awaitStatus(shell.id, "Exited")
      const read = yield* registry.output(shell.id, { reader: "t", mode: "all" })
      expect(read.text.split("\n").filter((l) => l !== "").length).toBe(20)
      expect(warnings).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))
})

describe("no leftovers", () => {
  it.live("each shell's processes carry its tag, and none is alive after the registry is released", () =>
    Effect.gen(function*() {
      const tags = yield* Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const shells = yield* Effect.forEach([1, 2, 3], () => registry.start({ command: "echo up; exec sleep 300" }, { owner }))
        for (const shell of shells) yield* registry.output(shell.id, { waitFor: "^up$", waitMs: 10_000 })
        // the command (under pidns, its `unshare` and init carry the tag too)
        for (const shell of shells) expect(commandProcesses(shell).map((p) => p.comm)).toEqual(["sleep"])
        return shells.map((s) => s.tag)
      }).pipe(Effect.provide(registryLayer()))
      for (const tag of tags) expect(taggedProcesses(tag)).toEqual([])
    }))
})
