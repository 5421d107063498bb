/**
 * The watcher: a process in its own session that stops the groups it was
 * told about when its pipe from the supervisor closes, however the
 * supervisor died. First its protocol, driven by the test as a supervisor
 * would, then a real supervisor in a child process killed with SIGKILL.
 */
import type { ChildProcess } from "node:child_process"
import { ShellRegistry } from "@corral/core"
import type { StopTarget } from "@corral/core/GroupStop"
import { Limits } from "@corral/core/Limits"
import * as Watcher from "@corral/core/Watcher"
import type { WatcherMessage } from "@corral/core/Watcher"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { inPidNamespace } from "./helpers.js"
import {
  catches,
  eventually,
  exitOf,
  isRunning,
  lineOf,
  nothingLeft,
  ownShellPrefix,
  realSleep,
  registryLayer,
  shellProcesses,
  spawnOwn,
  startSupervisor,
  startTimeOf,
  supervisorGrace,
  taggedProcesses,
  tempStateDir,
  unreapedChildren,
  watchersOf
} from "./fixtures/registry/harness.js"

const watcherMain = new URL("../dist/internal/watcherMain.js", import.meta.url).pathname
const SIGHUP = 1
const SIGTERM = 15

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

const targetOf = (child: ChildProcess, fields: Partial<StopTarget> = {}): StopTarget => ({
  pgid: child.pid!,
  sid: child.pid!,
  startTime: startTimeOf(child.pid!),
  ...fields
})

const send = (watcher: ChildProcess, message: WatcherMessage) => Effect.sync(() => watcher.stdin!.write(JSON.stringify(message) + "\n"))

/** Waits until the watcher's code has run: it installs handlers for SIGTERM and SIGHUP first thing. */
const loaded = (pid: number) =>
  eventually(`watcher ${pid} to load`, Effect.sync(() => (catches(pid, SIGTERM) && catches(pid, SIGHUP) ? true : undefined)))

describe("watcher protocol", () => {
  it.live("on EOF stops exactly the groups it was told about and not told to forget, escalating after the grace", () =>
    Effect.scoped(Effect.gen(function*() {
      const told = yield* spawnOwn("sleep", ["300"])
      const toldIgnoringTerm = yield* spawnOwn("sh", ["-c", "trap '' TERM; echo armed; exec sleep 300"])
      yield* lineOf(toldIgnoringTerm, /^armed$/)
      const forgotten = yield* spawnOwn("sleep", ["300"])
      const neverTold = yield* spawnOwn("sleep", ["300"])
      // a target newer than the live group with its number: how a recycled group id looks
      const recycled = yield* spawnOwn("sleep", ["300"])

      const watcher = yield* spawnOwn(process.execPath, [watcherMain, JSON.stringify({ grace: 300, killTimeout: 1000, killInterval: 10 })], {
        stdin: "pipe"
      })
      yield* loaded(watcher.pid!)
      const toldMessage = JSON.stringify({ op: "add", key: "told", target: targetOf(told) } satisfies WatcherMessage) + "\n"
      // a message split across writes is still read whole
      yield* Effect.sync(() => watcher.stdin!.write(toldMessage.slice(0, 10)))
      yield* realSleep(50)
      yield* Effect.sync(() => watcher.stdin!.write(toldMessage.slice(10)))
      // a line that is not a message is skipped: the others are still watched
      yield* Effect.sync(() => watcher.stdin!.write(`not json\n${JSON.stringify({ op: "add", key: "bad", target: { pgid: "x" } })}\n`))
      yield* send(watcher, { op: "add", key: "toldIgnoringTerm", target: targetOf(toldIgnoringTerm) })
      yield* send(watcher, { op: "add", key: "forgotten", target: targetOf(forgotten) })
      yield* send(watcher, { op: "remove", key: "forgotten" })
      yield* send(watcher, { op: "add", key: "recycled", target: targetOf(recycled, { startTime: startTimeOf(recycled.pid!) + 100 }) })

      // a terminal's signals do not take it early
      for (const signal of ["SIGTERM", "SIGHUP", "SIGINT"] as const) process.kill(watcher.pid!, signal)
      yield* realSleep(200)
      expect(isRunning(watcher.pid!)).toBe(true)
      expect([told, toldIgnoringTerm].map((c) => isRunning(c.pid!))).toEqual([true, true])

      yield* Effect.sync(() => watcher.stdin!.end())
      expect(yield* exitOf(told)).toEqual({ code: null, signal: "SIGTERM" })
      expect(yield* exitOf(toldIgnoringTerm)).toEqual({ code: null, signal: "SIGKILL" })
      expect(yield* exitOf(watcher)).toEqual({ code: 0, signal: null })
      expect([forgotten, neverTold, recycled].map((c) => isRunning(c.pid!))).toEqual([true, true, true])
    })))

  it.live("exits at once, signalling nothing, when the supervisor closes the pipe with nothing registered", () =>
    Effect.scoped(Effect.gen(function*() {
      const bystander = yield* spawnOwn("sleep", ["300"])
      const watcher = yield* spawnOwn(process.execPath, [watcherMain, "{}"], { stdin: "pipe" })
      yield* send(watcher, { op: "add", key: "bystander", target: targetOf(bystander) })
      yield* send(watcher, { op: "remove", key: "bystander" })
      yield* Effect.sync(() => watcher.stdin!.end())
      expect(yield* exitOf(watcher)).toEqual({ code: 0, signal: null })
      expect(isRunning(bystander.pid!)).toBe(true)
    })))
})

describe("a clean shutdown", () => {
  it.live("leaves no watcher behind, alive or unreaped, once the registry is released", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(ShellRegistry, (registry) => registry.start({ command: ["sleep", "300"] }, { owner: "watcher-test" })).pipe(
        Effect.provide(registryLayer())
      )
      // a watcher still running when the supervisor exits is orphaned, and
      // becomes a zombie for good where PID 1 never reaps
      expect(watchersOf(process.pid)).toEqual([])
      expect(unreapedChildren(process.pid)).toEqual([])
    }))
})

describe("a watcher ended early", () => {
  it.live("ends only when it watches nothing, is not replaced, and a later add starts one told every group", () =>
    Effect.scoped(Effect.gen(function*() {
      const group = yield* spawnOwn("sleep", ["300"])
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const watcher = yield* Watcher.make.pipe(Effect.provide(Limits.layer))
        const first = yield* watcher.pid
        yield* watcher.add("kept", targetOf(group))
        yield* watcher.endIfIdle
        yield* realSleep(100)
        expect(isRunning(first), "a watcher with a group to watch is not ended").toBe(true)

        yield* watcher.remove("kept")
        yield* watcher.endIfIdle
        yield* eventually(`watcher ${first} to exit`, Effect.sync(() => (isRunning(first) ? undefined : true)))
        // a death is replaced a second after the start at the latest; an end on purpose is not
        yield* realSleep(1_300)
        expect(watchersOf(process.pid)).toEqual([])

        yield* watcher.add("kept", targetOf(group))
        expect(watchersOf(process.pid).map((w) => w.pid)).toEqual([yield* watcher.pid])
        return first
      }))
      // released with the group still announced, the new watcher stops it: it was told
      expect(first).toBeGreaterThan(0)
      yield* eventually("the group stopped by the new watcher", Effect.sync(() => (isRunning(group.pid!) ? undefined : true)))
      expect(watchersOf(process.pid)).toEqual([])
    })))
})

describe("a supervisor killed with SIGKILL", () => {
  it.live.skipIf(!inPidNamespace)(
    `leaves no process of its three shells alive ${supervisorGrace} ms + 1 s later (orphans the shells on purpose: needs the PID namespace of \`npm test\`)`,
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const { child, ready } = yield* startSupervisor(stateDir)
        const prefix = `${ready.supervisor}:`
        expect(ready.shells).toHaveLength(3)
        for (const shell of ready.shells) expect(taggedProcesses(shell.tag).length).toBeGreaterThanOrEqual(2)
        const [watcher] = watchersOf(ready.supervisor)
        expect(watcher).toBeDefined()
        // measure the stop, not how long Node takes to load the watcher's code
        yield* loaded(watcher!.pid)

        const killedAt = Date.now()
        process.kill(ready.supervisor, "SIGKILL")
        yield* eventually(
          `every process of ${prefix}* gone`,
          Effect.sync(() => (shellProcesses(prefix).length === 0 ? true : undefined)),
          supervisorGrace + 1000
        )
        console.log(`supervisor SIGKILLed: its shells were gone after ${Date.now() - killedAt} ms (grace ${supervisorGrace} ms)`)
        yield* exitOf(child)
        yield* eventually(`watcher ${watcher!.pid} to exit`, Effect.sync(() => (isRunning(watcher!.pid) ? undefined : true)))
      }))
  )
})

describe("a supervisor killed in the tick its starts return", () => {
  it.live.skipIf(!inPidNamespace)(
    `leaves no process of its shells alive, though a start leaves its watcher message and journal for later (orphans the shells on purpose: needs the PID namespace of \`npm test\`)`,
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const { child, ready } = yield* startSupervisor(stateDir, "die-at-start")
        expect(ready.shells).toHaveLength(3)
        const prefix = `${ready.supervisor}:`
        expect(yield* exitOf(child)).toEqual({ code: null, signal: "SIGKILL" })
        // the watcher loads its stop code only now: more than a grace
        yield* eventually(
          `every process of ${prefix}* gone`,
          Effect.sync(() => (shellProcesses(prefix).length === 0 ? true : undefined)),
          supervisorGrace + 10_000
        )
      }))
  )
})

describe("a watcher that dies", () => {
  it.live.skipIf(!inPidNamespace)(
    `is replaced and told every shell: SIGKILLed after that, the supervisor leaves nothing ${supervisorGrace} ms + 1 s later (orphans the shells on purpose: needs the PID namespace of \`npm test\`)`,
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const { child, ready } = yield* startSupervisor(stateDir)
        const prefix = `${ready.supervisor}:`
        const [first] = watchersOf(ready.supervisor)
        expect(first).toBeDefined()
        yield* loaded(first!.pid)
        const warned = yield* Effect.fork(lineOf(child, /the watcher \(pid \d+\) ended/))

        process.kill(first!.pid, "SIGKILL")
        const replacement = yield* eventually(
          "a replacement watcher",
          Effect.sync(() => watchersOf(ready.supervisor).find((w) => w.pid !== first!.pid))
        )
        // said once the replacement has its stop code loaded: from then on, a stop starts at once
        const warning = yield* Fiber.join(warned)
        expect(warning).toContain(`the watcher (pid ${first!.pid}) ended (SIGKILL)`)
        expect(warning).toContain(`its replacement (pid ${replacement.pid}) watches the 3 group(s) still running`)

        const killedAt = Date.now()
        process.kill(ready.supervisor, "SIGKILL")
        yield* eventually(
          `every process of ${prefix}* gone`,
          Effect.sync(() => (shellProcesses(prefix).length === 0 ? true : undefined)),
          supervisorGrace + 1000
        )
        console.log(`watcher replaced, then supervisor SIGKILLed: its shells were gone after ${Date.now() - killedAt} ms (grace ${supervisorGrace} ms)`)
        yield* exitOf(child)
        yield* eventually(`watcher ${replacement.pid} to exit`, Effect.sync(() => (isRunning(replacement.pid) ? undefined : true)))
      }))
  )
})
