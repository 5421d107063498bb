/**
 * The state directory and the journal of live groups: private modes, the
 * environment override, and reaping at the next registry start of what a
 * dead supervisor left, only where pid, pgid and start time all match.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Containment, Journal, Limits, ProcessTable, ShellRegistry, StateDir } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import { inPidNamespace, kernelProcess } from "./helpers.js"
import {
  eventually,
  exitOf,
  isRunning,
  lineOf,
  nothingLeft,
  ownShellPrefix,
  registryLayer,
  shellProcesses,
  spawnOwn,
  startSupervisor,
  startTimeOf,
  tempStateDir,
  watchersOf
} from "./fixtures/registry/harness.js"

const owner = "journal-test"

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

const modeOf = (file: string) => fs.statSync(file).mode & 0o777

const readJournal = (stateDir: string, pid: number) =>
  JSON.parse(fs.readFileSync(Journal.fileOf(stateDir, pid), "utf8")) as Journal.JournalEntry

/** Builds a registry on `stateDir` (which reaps at start), recording what it logs. */
const withRegistryOn = <A, E, R>(stateDir: string, use: (registry: ShellRegistry["Type"]) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const logs: Array<{ readonly level: string; readonly message: string }> = []
    const recorder = Logger.make(({ logLevel, message }) => {
      logs.push({ level: logLevel.label, message: Array.isArray(message) ? message.join(" ") : String(message) })
    })
    const result = yield* Effect.flatMap(ShellRegistry, use).pipe(
      Effect.provide(registryLayer({ name: owner, stateDir, limits: { grace: Duration.millis(500) } })),
      Effect.provide(Logger.replace(Logger.defaultLogger, recorder))
    )
    return { result, logs }
  })

/** A pid no process has: one of ours that has exited and been reaped. */
const deadPid = Effect.scoped(Effect.gen(function*() {
  const gone = yield* spawnOwn("true", [])
  yield* exitOf(gone)
  return gone.pid!
}))

const supervisorEntry = (pid: number, startTime = 1): Journal.Supervisor => ({ pid, startTime, name: "crafted", startedAt: 0 })

/** A journal shell for the group led by `pid`, by default with the identity the registry would record. */
const shellEntry = (id: string, pid: number, fields: Partial<Journal.JournalShell> = {}): Journal.JournalShell => ({
  id,
  tag: `crafted:${id}`,
  pid,
  leaderStartTime: fields.leaderStartTime === undefined ? startTimeOf(pid) : fields.leaderStartTime,
  bornAfter: fields.bornAfter ?? startTimeOf(pid) - 1,
  command: "sleep 300",
  cwd: "/",
  owner: "crafted",
  startedAt: 0,
  ...fields
})

/** Writes a journal by hand, as a supervisor would have left it. */
const craft = (stateDir: string, entry: Journal.JournalEntry) => {
  fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
  fs.writeFileSync(Journal.fileOf(stateDir, entry.supervisor.pid), JSON.stringify(entry), { mode: 0o600 })
}

/** `sh -c 'sleep 300 & echo $!'` in a new group: the leader exits, its sleep stays, orphaned. */
const leaderlessGroup = (env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const leader = yield* spawnOwn("sh", ["-c", "sleep 300 & echo $!"], { env })
    const member = Number(yield* lineOf(leader, /^\d+$/))
    yield* exitOf(leader)
    yield* Effect.addFinalizer(() => Effect.sync(() => isRunning(member) && process.kill(member, "SIGKILL")))
    return { pgid: leader.pid!, member }
  })

describe("state directory", () => {
  it.live("is created 0700, the journal is 0600 and follows the live shells, and is removed at shutdown", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const file = Journal.fileOf(stateDir, process.pid)
      yield* withRegistryOn(stateDir, (registry) =>
        Effect.gen(function*() {
          expect(modeOf(stateDir)).toBe(0o700)
          const shell = yield* registry.start({ command: ["sleep", "300"] }, { owner })
          expect(modeOf(Journal.directory(stateDir))).toBe(0o700)
          expect(modeOf(file)).toBe(0o600)
          expect(readJournal(stateDir, process.pid)).toMatchObject({
            version: 1,
            supervisor: { pid: process.pid, startTime: startTimeOf(process.pid), name: owner },
            shells: [{ id: shell.id, tag: shell.tag, pid: shell.pid, leaderStartTime: startTimeOf(shell.pid), command: "sleep 300", owner }]
          })
          yield* registry.kill(shell.id, { owner })
          expect(readJournal(stateDir, process.pid).shells).toEqual([])
          expect(modeOf(file)).toBe(0o600)
          expect(fs.readdirSync(Journal.directory(stateDir))).toEqual([path.basename(file)])
        }))
      expect(fs.existsSync(file)).toBe(false)
    })))

  it.live("is tightened to 0700 when it exists with looser modes", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(stateDir, { mode: 0o755 })
      fs.chmodSync(stateDir, 0o755)
      yield* withRegistryOn(stateDir, () => Effect.void)
      expect(modeOf(stateDir)).toBe(0o700)
    })))

  it.live("comes from CORRAL_STATE_DIR, else XDG_STATE_HOME/corral, and the registry uses it", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const fromEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
      expect(yield* StateDir.resolve.pipe(fromEnv({ CORRAL_STATE_DIR: stateDir, XDG_STATE_HOME: "/elsewhere" }))).toBe(stateDir)
      expect(yield* StateDir.resolve.pipe(fromEnv({ XDG_STATE_HOME: "/xdg" }))).toBe("/xdg/corral")

      const services = Containment.layer().pipe(Layer.provideMerge(Layer.mergeAll(ProcessTable.layer, Limits.layer)))
      const used = yield* Effect.gen(function*() {
        const registry = yield* ShellRegistry
        yield* registry.start({ command: ["sleep", "300"] }, { owner })
        expect(modeOf(Journal.fileOf(stateDir, process.pid))).toBe(0o600)
        return registry.stateDir
      }).pipe(Effect.provide(ShellRegistry.layer({ name: owner }).pipe(Layer.provide(services))), fromEnv({ CORRAL_STATE_DIR: stateDir }))
      expect(used).toBe(stateDir)
    })))

  it.live("is not touched when crash safety is off", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      yield* Effect.flatMap(ShellRegistry, (registry) => registry.start({ command: ["sleep", "300"] }, { owner })).pipe(
        Effect.provide(registryLayer({ stateDir, crashSafety: false }))
      )
      expect(fs.existsSync(stateDir)).toBe(false)
    })))
})

describe("reaping at registry start", () => {
  it.live("stops a dead supervisor's group only where pid, pgid and start time all match", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const matching = yield* spawnOwn("sleep", ["300"])
      const otherStartTime = yield* spawnOwn("sleep", ["300"])
      // not a group leader: its group is the test's
      const notLeader = yield* spawnOwn("sleep", ["300"], { detached: false })
      expect(kernelProcess(notLeader.pid!)!.pgid).not.toBe(notLeader.pid)
      const supervisor = yield* deadPid
      craft(stateDir, {
        version: 1,
        supervisor: supervisorEntry(supervisor),
        shells: [
          shellEntry("s1", matching.pid!),
          shellEntry("s2", otherStartTime.pid!, { leaderStartTime: startTimeOf(otherStartTime.pid!) + 1 }),
          shellEntry("s3", notLeader.pid!)
        ]
      })

      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(yield* exitOf(matching)).toEqual({ code: null, signal: "SIGTERM" })
      expect(isRunning(otherStartTime.pid!)).toBe(true)
      expect(isRunning(notLeader.pid!)).toBe(true)
      expect(fs.existsSync(Journal.fileOf(stateDir, supervisor))).toBe(false)
      const warnings = logs.filter((l) => l.level === "WARN")
      expect(warnings).toHaveLength(1)
      expect(warnings[0]!.message).toContain("crafted:s1")
      expect(warnings[0]!.message).toContain(`pid ${supervisor}`)
    })))

  it.live("leaves the journal of a live supervisor alone, but treats a reused supervisor pid as dead", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const liveSupervisor = yield* spawnOwn("sleep", ["300"])
      const itsShell = yield* spawnOwn("sleep", ["300"])
      craft(stateDir, {
        version: 1,
        supervisor: supervisorEntry(liveSupervisor.pid!, startTimeOf(liveSupervisor.pid!)),
        shells: [shellEntry("s1", itsShell.pid!)]
      })
      const reusedPid = yield* spawnOwn("sleep", ["300"])
      const orphanedShell = yield* spawnOwn("sleep", ["300"])
      craft(stateDir, {
        version: 1,
        supervisor: supervisorEntry(reusedPid.pid!, startTimeOf(reusedPid.pid!) - 1),
        shells: [shellEntry("s1", orphanedShell.pid!)]
      })

      yield* withRegistryOn(stateDir, () => Effect.void)
      expect(isRunning(itsShell.pid!)).toBe(true)
      expect(fs.existsSync(Journal.fileOf(stateDir, liveSupervisor.pid!))).toBe(true)
      expect(yield* exitOf(orphanedShell)).toEqual({ code: null, signal: "SIGTERM" })
      expect(isRunning(reusedPid.pid!)).toBe(true)
      expect(fs.existsSync(Journal.fileOf(stateDir, reusedPid.pid!))).toBe(false)
    })))

  it.live("reaps the journal an earlier process with this process's pid left", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const orphan = yield* spawnOwn("sleep", ["300"])
      // pids are reused: the earlier process had ours but started at another time
      craft(stateDir, {
        version: 1,
        supervisor: supervisorEntry(process.pid, startTimeOf(process.pid) - 1),
        shells: [shellEntry("s1", orphan.pid!)]
      })
      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(yield* Effect.timeoutOption(exitOf(orphan), "5 seconds")).toEqual(Option.some({ code: null, signal: "SIGTERM" }))
      expect(logs.filter((l) => l.level === "WARN").map((l) => l.message.includes("crafted:s1"))).toEqual([true])
    })))

  it.live("skips journals it cannot read", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const bystander = yield* spawnOwn("sleep", ["300"])
      fs.mkdirSync(Journal.directory(stateDir), { recursive: true })
      fs.writeFileSync(path.join(Journal.directory(stateDir), "12345.json"), "{ not json")
      fs.writeFileSync(
        path.join(Journal.directory(stateDir), "12346.json"),
        JSON.stringify({ version: 2, supervisor: supervisorEntry(12346), shells: [shellEntry("s1", bystander.pid!)] })
      )
      expect(yield* Journal.readAll(stateDir)).toEqual([])
      yield* withRegistryOn(stateDir, () => Effect.void)
      expect(isRunning(bystander.pid!)).toBe(true)
    })))

  it.live.skipIf(!inPidNamespace)(
    "stops a leaderless group only through a member carrying the shell's tag and born after it (orphans sleeps on purpose: needs the PID namespace of `npm test`)",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const tagged = yield* leaderlessGroup({ CORRAL_SHELL_ID: "crafted:s1" })
        const untagged = yield* leaderlessGroup()
        const older = yield* leaderlessGroup({ CORRAL_SHELL_ID: "crafted:s3" })
        const leaderless = (id: string, group: { pgid: number; member: number }, bornAfter: number) =>
          shellEntry(id, group.pgid, { leaderStartTime: 1, bornAfter })
        const supervisor = yield* deadPid
        craft(stateDir, {
          version: 1,
          supervisor: supervisorEntry(supervisor),
          shells: [
            leaderless("s1", tagged, startTimeOf(tagged.member) - 1),
            leaderless("s2", untagged, startTimeOf(untagged.member) - 1),
            leaderless("s3", older, startTimeOf(older.member) + 1)
          ]
        })

        const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
        expect(isRunning(tagged.member)).toBe(false)
        expect(isRunning(untagged.member)).toBe(true)
        expect(isRunning(older.member)).toBe(true)
        expect(logs.filter((l) => l.level === "WARN").map((l) => l.message.includes("crafted:s1"))).toEqual([true])
      }))
  )

  it.live.skipIf(!inPidNamespace)(
    "stops what a supervisor SIGKILLed together with its watcher left, removes its journal and logs it (orphans the shells on purpose: needs the PID namespace of `npm test`)",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const { child, ready } = yield* startSupervisor(stateDir)
        const prefix = `${ready.supervisor}:`
        const [watcher] = watchersOf(ready.supervisor)
        expect(watcher).toBeDefined()
        process.kill(watcher!.pid, "SIGKILL")
        yield* eventually(`watcher ${watcher!.pid} to die`, Effect.sync(() => (isRunning(watcher!.pid) ? undefined : true)))
        process.kill(ready.supervisor, "SIGKILL")
        yield* exitOf(child)

        const journal = readJournal(stateDir, ready.supervisor)
        expect(journal.shells.map((s) => s.tag)).toEqual(ready.shells.map((s) => s.tag))
        const orphans = shellProcesses(prefix)
        expect(orphans.length).toBeGreaterThanOrEqual(6)

        const { logs } = yield* withRegistryOn(stateDir, (registry) => Effect.succeed(registry.supervisor))
        expect(shellProcesses(prefix)).toEqual([])
        expect(fs.existsSync(Journal.fileOf(stateDir, ready.supervisor))).toBe(false)
        const warnings = logs.filter((l) => l.level === "WARN").map((l) => l.message)
        expect(warnings).toHaveLength(3)
        for (const [i, shell] of ready.shells.entries()) {
          expect(warnings[i]).toContain(`reaped shell ${shell.tag}`)
          expect(warnings[i]).toContain(`pid ${ready.supervisor}`)
        }
      }))
  )
})
