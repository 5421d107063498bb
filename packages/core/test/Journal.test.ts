/**
 * The state directory and the journal of live groups: private modes, the
 * environment override, reaping at the next registry start of what a dead
 * supervisor left (only where pid, pgid, start time, tag and uid all match),
 * and a directory where every file is untrusted: other users' files, links,
 * path tricks, malformed journals, other PID namespaces, read-only places.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { Containment, Journal, Limits, ProcessTable, ShellRegistry, StateDir } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import {
  canMakeReadOnly,
  isRoot,
  nameFor,
  otherUid,
  ownPidNamespace,
  readOnly,
  readOnlyReason,
  supervisorEntry
} from "./fixtures/stateDir.js"
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

const decodeJournal = Schema.decodeUnknownSync(Schema.parseJson(Journal.JournalEntry))

const readJournal = (stateDir: string, pid: number) => decodeJournal(fs.readFileSync(Journal.fileOf(stateDir, nameFor(pid)), "utf8"))

const journalOf = (stateDir: string, pid: number, namespace = ownPidNamespace) => Journal.fileOf(stateDir, nameFor(pid, namespace))

const services = Containment.layer().pipe(Layer.provideMerge(Layer.mergeAll(ProcessTable.layer, Limits.layer)))

/** How building a registry on `stateDir` fails. */
const buildFailure = (stateDir: string) =>
  Effect.flip(Effect.scoped(Layer.build(ShellRegistry.layer({ name: owner, stateDir }).pipe(Layer.provide(services)))))

const warningsOf = (logs: ReadonlyArray<{ readonly level: string; readonly message: string }>) =>
  logs.filter((l) => l.level === "WARN").map((l) => l.message)

/** Builds a registry on `stateDir` (which reaps at start), recording what it logs. */
type Logs = Array<{ readonly level: string; readonly message: string }>

const withRegistryOn = <A, E, R>(stateDir: string, use: (registry: ShellRegistry["Type"], logs: Logs) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const logs: Logs = []
    const recorder = Logger.make(({ logLevel, message }) => {
      logs.push({ level: logLevel.label, message: Array.isArray(message) ? message.join(" ") : String(message) })
    })
    const result = yield* Effect.flatMap(ShellRegistry, (registry) => use(registry, logs)).pipe(
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

/** The tag the registry of supervisor `supervisor` gives its shell `id`. */
const tagOf = (supervisor: number, id: string) => `${supervisor}:${id}`

/** A journal shell of `supervisor` for the group led by `pid`, by default with the identity the registry would record. */
const shellEntry = (supervisor: number, id: string, pid: number, fields: Partial<Journal.JournalShell> = {}): Journal.JournalShell => ({
  id,
  tag: tagOf(supervisor, id),
  pid,
  leaderStartTime: fields.leaderStartTime === undefined ? startTimeOf(pid) : fields.leaderStartTime,
  bornAfter: fields.bornAfter ?? startTimeOf(pid) - 1,
  command: "sleep 300",
  cwd: "/",
  owner: "crafted",
  startedAt: 0,
  ...fields
})

/** Writes a journal by hand, as a supervisor would have left it, or anything else under a journal's name. */
const craft = (stateDir: string, entry: Journal.JournalEntry | string, name = typeof entry === "string" ? "" : Journal.nameOf(entry.supervisor)) => {
  fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
  const file = path.join(Journal.directory(stateDir), `${name}.json`)
  fs.writeFileSync(file, typeof entry === "string" ? entry : JSON.stringify(entry), { mode: 0o600 })
  return file
}

/** A journal of `supervisor` (dead, by default) with the given shells. */
const journal = (supervisor: number, shells: ReadonlyArray<Journal.JournalShell>, fields: Partial<Journal.Supervisor> = {}): Journal.JournalEntry => ({
  version: 2,
  supervisor: supervisorEntry(supervisor, fields),
  shells
})

/** A sleep tagged as the shell `id` of `supervisor`, in a group of its own. */
const taggedSleep = (supervisor: number, id: string, options: { readonly detached?: boolean; readonly uid?: number } = {}) =>
  spawnOwn("sleep", ["300"], { ...options, env: { CORRAL_SHELL_ID: tagOf(supervisor, id) } })

/** `sh -c 'sleep 300 & echo $!'` in a new group: the leader exits, its sleep stays, orphaned. */
const leaderlessGroup = (env: Record<string, string> = {}, uid?: number) =>
  Effect.gen(function*() {
    const leader = yield* spawnOwn("sh", ["-c", "sleep 300 & echo $!"], { env, ...(uid === undefined ? {} : { uid }) })
    const member = Number(yield* lineOf(leader, /^\d+$/))
    yield* exitOf(leader)
    yield* Effect.addFinalizer(() => Effect.sync(() => isRunning(member) && process.kill(member, "SIGKILL")))
    return { pgid: leader.pid!, member }
  })

describe("state directory", () => {
  it.live("is created 0700, the journal is 0600 and follows the live shells, and is removed at shutdown", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const file = journalOf(stateDir, process.pid)
      yield* withRegistryOn(stateDir, (registry) =>
        Effect.gen(function*() {
          expect(modeOf(stateDir)).toBe(0o700)
          const shell = yield* registry.start({ command: ["sleep", "300"] }, { owner })
          expect(modeOf(Journal.directory(stateDir))).toBe(0o700)
          // written just after the start returns, off its path (ADR 0018)
          yield* eventually("the journal to list the shell", Effect.sync(() => (fs.existsSync(file) && readJournal(stateDir, process.pid).shells.length === 1) || undefined))
          expect(modeOf(file)).toBe(0o600)
          expect(readJournal(stateDir, process.pid)).toMatchObject({
            version: 2,
            supervisor: { pid: process.pid, startTime: startTimeOf(process.pid), uid: process.getuid!(), pidns: ownPidNamespace, name: owner },
            shells: [{ id: shell.id, tag: shell.tag, pid: shell.pid, leaderStartTime: startTimeOf(shell.pid), command: "sleep 300", owner }]
          })
          yield* registry.kill(shell.id, { owner })
          yield* eventually("the journal to drop the shell", Effect.sync(() => readJournal(stateDir, process.pid).shells.length === 0 || undefined))
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

      const used = yield* Effect.gen(function*() {
        const registry = yield* ShellRegistry
        yield* registry.start({ command: ["sleep", "300"] }, { owner })
        yield* eventually("the journal", Effect.sync(() => fs.existsSync(journalOf(stateDir, process.pid)) || undefined))
        expect(modeOf(journalOf(stateDir, process.pid))).toBe(0o600)
        return registry.stateDir
      }).pipe(Effect.provide(ShellRegistry.layer({ name: owner }).pipe(Layer.provide(services))), fromEnv({ CORRAL_STATE_DIR: stateDir }))
      expect(used).toBe(stateDir)
    })))

  it.effect("readers also search ~/.local/state/corral when XDG_STATE_HOME moves the state directory, not when CORRAL_STATE_DIR names it", () =>
    Effect.gen(function*() {
      const fromEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
      const underHome = path.join(os.homedir(), ".local", "state", "corral")
      expect(yield* StateDir.searched.pipe(fromEnv({ XDG_STATE_HOME: "/xdg" }))).toEqual(["/xdg/corral", underHome])
      expect(yield* StateDir.searched.pipe(fromEnv({}))).toEqual([underHome])
      expect(yield* StateDir.searched.pipe(fromEnv({ CORRAL_STATE_DIR: "/one", XDG_STATE_HOME: "/xdg" }))).toEqual(["/one"])
    }))

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
  it.live("stops a dead supervisor's group only where pid, pgid, start time, tag and uid all match", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const supervisor = yield* deadPid
      const matching = yield* taggedSleep(supervisor, "s1")
      const otherStartTime = yield* taggedSleep(supervisor, "s2")
      // not a group leader: its group is the test's
      const notLeader = yield* taggedSleep(supervisor, "s3", { detached: false })
      expect(kernelProcess(notLeader.pid!)!.pgid).not.toBe(notLeader.pid)
      // the right numbers, but not the shell's tag: a pid reused by a process corral did not start
      const untagged = yield* spawnOwn("sleep", ["300"])
      const otherTag = yield* taggedSleep(supervisor, "s9")
      // the right numbers and tag, but another user's process
      const otherUser = isRoot ? yield* taggedSleep(supervisor, "s6", { uid: otherUid }) : undefined
      craft(stateDir, journal(supervisor, [
        shellEntry(supervisor, "s1", matching.pid!),
        shellEntry(supervisor, "s2", otherStartTime.pid!, { leaderStartTime: startTimeOf(otherStartTime.pid!) + 1 }),
        shellEntry(supervisor, "s3", notLeader.pid!),
        shellEntry(supervisor, "s4", untagged.pid!),
        shellEntry(supervisor, "s5", otherTag.pid!),
        ...(otherUser === undefined ? [] : [shellEntry(supervisor, "s6", otherUser.pid!)])
      ]))

      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(yield* exitOf(matching)).toEqual({ code: null, signal: "SIGTERM" })
      for (const spared of [otherStartTime, notLeader, untagged, otherTag, ...(otherUser === undefined ? [] : [otherUser])]) {
        expect(isRunning(spared.pid!)).toBe(true)
      }
      expect(fs.existsSync(journalOf(stateDir, supervisor))).toBe(false)
      const warnings = warningsOf(logs)
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain(tagOf(supervisor, "s1"))
      expect(warnings[0]).toContain(`pid ${supervisor}`)
    })))

  it.live("leaves the journal of a live supervisor alone, but treats a reused supervisor pid as dead", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const liveSupervisor = yield* spawnOwn("sleep", ["300"])
      const itsShell = yield* taggedSleep(liveSupervisor.pid!, "s1")
      craft(stateDir, journal(liveSupervisor.pid!, [shellEntry(liveSupervisor.pid!, "s1", itsShell.pid!)], {
        startTime: startTimeOf(liveSupervisor.pid!)
      }))
      const reusedPid = yield* spawnOwn("sleep", ["300"])
      const orphanedShell = yield* taggedSleep(reusedPid.pid!, "s1")
      craft(stateDir, journal(reusedPid.pid!, [shellEntry(reusedPid.pid!, "s1", orphanedShell.pid!)], {
        startTime: startTimeOf(reusedPid.pid!) - 1
      }))

      yield* withRegistryOn(stateDir, () => Effect.void)
      expect(isRunning(itsShell.pid!)).toBe(true)
      expect(fs.existsSync(journalOf(stateDir, liveSupervisor.pid!))).toBe(true)
      expect(yield* exitOf(orphanedShell)).toEqual({ code: null, signal: "SIGTERM" })
      expect(isRunning(reusedPid.pid!)).toBe(true)
      expect(fs.existsSync(journalOf(stateDir, reusedPid.pid!))).toBe(false)
    })))

  it.live("reaps the journal an earlier process with this process's pid left", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const orphan = yield* taggedSleep(process.pid, "s1")
      // pids are reused: the earlier process had ours but started at another time
      craft(stateDir, journal(process.pid, [shellEntry(process.pid, "s1", orphan.pid!)], { startTime: startTimeOf(process.pid) - 1 }))
      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(yield* Effect.timeoutOption(exitOf(orphan), "5 seconds")).toEqual(Option.some({ code: null, signal: "SIGTERM" }))
      expect(warningsOf(logs).map((l) => l.includes(tagOf(process.pid, "s1")))).toEqual([true])
    })))

  it.live.skipIf(!inPidNamespace)(
    "stops a leaderless group only through a member carrying the shell's tag, of its uid and born after it (orphans sleeps on purpose: needs the PID namespace of `npm test`)",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const stateDir = yield* tempStateDir
        const supervisor = yield* deadPid
        const tagged = yield* leaderlessGroup({ CORRAL_SHELL_ID: tagOf(supervisor, "s1") })
        const untagged = yield* leaderlessGroup()
        const older = yield* leaderlessGroup({ CORRAL_SHELL_ID: tagOf(supervisor, "s3") })
        const otherUser = isRoot ? yield* leaderlessGroup({ CORRAL_SHELL_ID: tagOf(supervisor, "s4") }, otherUid) : undefined
        const leaderless = (id: string, group: { pgid: number; member: number }, bornAfter: number) =>
          shellEntry(supervisor, id, group.pgid, { leaderStartTime: 1, bornAfter })
        craft(stateDir, journal(supervisor, [
          leaderless("s1", tagged, startTimeOf(tagged.member) - 1),
          leaderless("s2", untagged, startTimeOf(untagged.member) - 1),
          leaderless("s3", older, startTimeOf(older.member) + 1),
          ...(otherUser === undefined ? [] : [leaderless("s4", otherUser, startTimeOf(otherUser.member) - 1)])
        ]))

        const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
        expect(isRunning(tagged.member)).toBe(false)
        expect(isRunning(untagged.member)).toBe(true)
        expect(isRunning(older.member)).toBe(true)
        if (otherUser !== undefined) expect(isRunning(otherUser.member)).toBe(true)
        expect(warningsOf(logs).map((l) => l.includes(tagOf(supervisor, "s1")))).toEqual([true])
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
        // held still, the supervisor cannot replace its watcher before it dies too
        process.kill(ready.supervisor, "SIGSTOP")
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
        expect(fs.existsSync(journalOf(stateDir, ready.supervisor))).toBe(false)
        const warnings = warningsOf(logs)
        expect(warnings).toHaveLength(3)
        for (const [i, shell] of ready.shells.entries()) {
          expect(warnings[i]).toContain(`reaped shell ${shell.tag}`)
          expect(warnings[i]).toContain(`pid ${ready.supervisor}`)
        }
      }))
  )
})

/** Files under `supervisors/`, sorted. */
const listing = (stateDir: string) => fs.readdirSync(Journal.directory(stateDir)).sort()

describe.skipIf(!isRoot)("a state directory or file of another user (as root: only root can own files as another user)", () => {
  it.live("a state directory owned by someone else is refused, naming its owner and the override, and left as it was", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(stateDir, { mode: 0o755 })
      fs.chmodSync(stateDir, 0o755)
      fs.chownSync(stateDir, otherUid, otherUid)
      const error = yield* buildFailure(stateDir)
      expect(error).toMatchObject({ _tag: "StateDirError", path: stateDir })
      expect(error.message).toBe(
        `cannot use the state directory ${stateDir}: it belongs to uid ${otherUid}, not to you (uid 0). ` +
          "Set CORRAL_STATE_DIR to a writable directory of your own"
      )
      expect(modeOf(stateDir)).toBe(0o755)
      expect(fs.readdirSync(stateDir)).toEqual([])
    })))

  it.live("so is its supervisors directory", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
      fs.chownSync(Journal.directory(stateDir), otherUid, otherUid)
      const error = yield* buildFailure(stateDir)
      expect(error).toMatchObject({ _tag: "StateDirError", path: Journal.directory(stateDir) })
      expect(error.message).toContain(`belongs to uid ${otherUid}`)
    })))

  it.live("a journal of another user is never acted on: the process it names keeps running, and it is set aside once", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const supervisor = yield* deadPid
      // everything about this process matches, but corral never started it: only the journal says so
      const victim = yield* taggedSleep(supervisor, "s1")
      const forged = craft(stateDir, journal(supervisor, [shellEntry(supervisor, "s1", victim.pid!)]))
      fs.chownSync(forged, otherUid, otherUid)

      const first = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(isRunning(victim.pid!)).toBe(true)
      expect(listing(stateDir)).toEqual([`${path.basename(forged)}.bad`])
      expect(warningsOf(first.logs)).toEqual([
        `ignored ${forged}: it belongs to uid ${otherUid}, not to you (uid 0); moved it to ${path.basename(forged)}.bad`
      ])
      const second = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(warningsOf(second.logs)).toEqual([])
      expect(isRunning(victim.pid!)).toBe(true)
    })))
})

describe("links in the state directory", () => {
  it.live("a state directory that is a symbolic link is refused, even to a directory of this user", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const real = `${stateDir}.real`
      fs.mkdirSync(real, { mode: 0o700 })
      fs.symlinkSync(real, stateDir)
      const error = yield* buildFailure(stateDir)
      expect(error).toMatchObject({ _tag: "StateDirError", path: stateDir })
      expect(error.message).toContain("it is a symbolic link, and corral never follows links there")
      expect(error.message).toContain("CORRAL_STATE_DIR")
      expect(fs.readdirSync(real)).toEqual([])
    })))

  it.live("a link planted at the journal's path, or at the temporary path it used to write through, is never written through", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const victims = path.join(path.dirname(stateDir), "victims")
      fs.mkdirSync(victims)
      const target = (name: string) => {
        const file = path.join(victims, name)
        fs.writeFileSync(file, "precious", { mode: 0o644 })
        return file
      }
      fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
      const file = journalOf(stateDir, process.pid)
      fs.symlinkSync(target("final"), file)
      // the name the journal's temporary file had: now random, created exclusively, never followed
      fs.symlinkSync(target("temporary"), `${file}.${process.pid}.tmp`)

      const { logs } = yield* withRegistryOn(stateDir, (registry) => registry.start({ command: ["sleep", "300"] }, { owner }))
      for (const name of ["final", "temporary"]) {
        expect(fs.readFileSync(path.join(victims, name), "utf8")).toBe("precious")
        expect(modeOf(path.join(victims, name))).toBe(0o644)
      }
      expect(warningsOf(logs)).toEqual([`ignored ${file}: it is a symbolic link; moved it to ${path.basename(file)}.bad`])
      // the journal itself was written as a private file of its own, then removed at shutdown
      expect(listing(stateDir)).toEqual([`${path.basename(file)}.${process.pid}.tmp`, `${path.basename(file)}.bad`].sort())
    })))

  it.live("a journal written while a link sits at its path replaces the link, 0600, and leaves the link's target alone", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const target = `${stateDir}.target`
      fs.writeFileSync(target, "precious")
      yield* StateDir.ensure(stateDir)
      yield* StateDir.ensure(Journal.directory(stateDir))
      const entry = journal(4242, [])
      fs.symlinkSync(target, Journal.fileOf(stateDir, Journal.nameOf(entry.supervisor)))
      yield* Journal.write(stateDir, entry)
      const written = Journal.fileOf(stateDir, Journal.nameOf(entry.supervisor))
      expect(fs.lstatSync(written).isFile()).toBe(true)
      expect(modeOf(written)).toBe(0o600)
      expect(fs.readFileSync(target, "utf8")).toBe("precious")
      expect(listing(stateDir)).toEqual([path.basename(written)])
    })))

  it.live("a FIFO at a journal's path does not hang the reader: it is set aside", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
      const fifo = journalOf(stateDir, 4242)
      yield* Effect.sync(() => execFileSync("mkfifo", [fifo]))
      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void).pipe(Effect.timeout("10 seconds"))
      expect(warningsOf(logs)).toEqual([`ignored ${fifo}: it is not a regular file; moved it to ${path.basename(fifo)}.bad`])
    })))
})

/**
 * Removes `file` just before this process opens it, as its supervisor's
 * clean exit would between a reader's listing and its read; until the
 * scope closes.
 */
const removedWhenOpened = (file: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const nodeFs = createRequire(import.meta.url)("node:fs") as typeof fs
      const original = nodeFs.openSync
      nodeFs.openSync = ((target: fs.PathLike, ...rest: Array<unknown>) => {
        if (String(target) === file) nodeFs.rmSync(file, { force: true })
        return (original as (...args: Array<unknown>) => number)(target, ...rest)
      }) as typeof fs.openSync
      // the ES module bindings of node:fs follow the change
      syncBuiltinESMExports()
      return () => (nodeFs.openSync = original, syncBuiltinESMExports())
    }),
    (restore) => Effect.sync(restore)
  )

describe("a journal removed while it is read", () => {
  it.live("is its supervisor's clean exit: skipped without a word, never set aside, never a warning to delete what is gone", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const file = craft(stateDir, journal(yield* deadPid, []))
      yield* removedWhenOpened(file)
      // before, the reader warned: "ignored ...: ENOENT ...; cannot move it aside (ENOENT ...): delete it"
      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(warningsOf(logs)).toEqual([])
      expect(listing(stateDir)).toEqual([])
    })))

  it.live("so is any refused file gone by the time it is refused (a socket whose supervisor left between `corral ls`'s listing and its check)", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(Journal.directory(stateDir), { recursive: true, mode: 0o700 })
      const gone = path.join(Journal.directory(stateDir), `${nameFor(4242)}.sock`)
      const logs: Logs = []
      const recorder = Logger.make(({ logLevel, message }) => {
        logs.push({ level: logLevel.label, message: String(message) })
      })
      yield* Journal.refuse(gone, "ENOENT: no such file or directory").pipe(Effect.provide(Logger.replace(Logger.defaultLogger, recorder)))
      expect(warningsOf(logs)).toEqual([])
      expect(listing(stateDir)).toEqual([])
    })))
})

describe("journals named by their file", () => {
  it.live("a path in a journal's fields is never deleted: the journal is refused and set aside, the path left alone", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const outside = path.join(path.dirname(stateDir), "x.json")
      const inside = path.join(stateDir, "x.json")
      const supervisor = yield* deadPid
      const evil = { ...journal(supervisor, []), supervisor: { ...supervisorEntry(supervisor), pid: "../../x" } }
      const file = craft(stateDir, JSON.stringify(evil), nameFor(supervisor))
      for (const f of [outside, inside]) fs.writeFileSync(f, "do not delete")

      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(fs.readFileSync(outside, "utf8")).toBe("do not delete")
      expect(fs.readFileSync(inside, "utf8")).toBe("do not delete")
      expect(warningsOf(logs)).toEqual([
        `ignored ${file}: it is malformed: supervisor.pid: Expected number, actual "../../x"; moved it to ${path.basename(file)}.bad`
      ])
    })))

  it.live("a journal that names another supervisor than its file does is refused, and that supervisor's journal kept", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const live = yield* spawnOwn("sleep", ["300"])
      const kept = craft(stateDir, journal(live.pid!, [], { startTime: startTimeOf(live.pid!) }))
      const dead = yield* deadPid
      // under a dead supervisor's name, it claims to be the live one's: reaping it would remove the live one's files
      const impostor = craft(stateDir, journal(live.pid!, []), nameFor(dead))
      // a name corral never gives, like the bare pids of older versions
      const unnamed = craft(stateDir, journal(dead, []), `${dead}`)

      const { logs } = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(fs.existsSync(kept)).toBe(true)
      expect(warningsOf(logs).sort()).toEqual([
        `ignored ${impostor}: it describes supervisor ${nameFor(live.pid!)}, not the one its name says; moved it to ${path.basename(impostor)}.bad`,
        `ignored ${unnamed}: its name is not <pid namespace>-<pid>.json; moved it to ${path.basename(unnamed)}.bad`
      ].sort())
    })))
})

describe("malformed journals", () => {
  it.live("a truncated, wrong-version or hostile journal is skipped, logged once and set aside; the others are reaped", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const supervisor = yield* deadPid
      const orphan = yield* taggedSleep(supervisor, "s1")
      const bystander = yield* spawnOwn("sleep", ["300"], { env: { CORRAL_SHELL_ID: tagOf(4001, "s1") } })
      const valid = journal(4001, [shellEntry(4001, "s1", bystander.pid!)])
      const bad: ReadonlyArray<readonly [number, string, string]> = [
        [4001, JSON.stringify(valid).slice(0, 40), "it is not JSON: "],
        [4002, "", "it is not JSON: "],
        [4003, "null", "it is not a version 2 journal (version undefined)"],
        [4004, JSON.stringify({ ...valid, version: 1, supervisor: { ...valid.supervisor, pid: 4004 } }), "it is not a version 2 journal (version 1)"],
        [4005, JSON.stringify({ ...valid, version: 99 }), "it is not a version 2 journal (version 99)"],
        [4006, JSON.stringify({ ...valid, supervisor: { pid: 4006 }, shells: null }), "it is malformed: supervisor.startTime: is missing"],
        [4007, JSON.stringify({ ...journal(4007, []), shells: [{ ...shellEntry(4007, "s1", 1), pid: 1 }] }), "it is malformed: shells.0.pid: "],
        [4008, JSON.stringify(journal(4008, [{ ...shellEntry(4008, "s1", bystander.pid!), tag: tagOf(4001, "s1") }])), `its shell s1 has tag "${tagOf(4001, "s1")}", not its supervisor's`],
        // the message of a decode that refused it would describe it, recursing as deep: a stack overflow, once a crash
        [4009, `{"version":2,"supervisor":${"[".repeat(3000)}${"]".repeat(3000)},"shells":[]}`, "it nests values over 16 levels deep, which no journal does"],
        [4010, `{"version":2,"supervisor":${"{\"a\":".repeat(100_000)}1${"}".repeat(100_000)},"shells":[]}`, "it nests values over 16 levels deep"]
      ]
      const files = bad.map(([pid, text]) => craft(stateDir, text, nameFor(pid)))
      craft(stateDir, journal(supervisor, [shellEntry(supervisor, "s1", orphan.pid!)]))

      const first = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(yield* exitOf(orphan)).toEqual({ code: null, signal: "SIGTERM" })
      expect(isRunning(bystander.pid!)).toBe(true)
      const warnings = warningsOf(first.logs)
      expect(warnings).toHaveLength(bad.length + 1)
      for (const [i, [, , reason]] of bad.entries()) {
        const warning = warnings.find((w) => w.startsWith(`ignored ${files[i]}: `))
        expect(warning, files[i]).toBeDefined()
        expect(warning).toContain(reason)
        expect(warning).toMatch(new RegExp(`; moved it to ${path.basename(files[i]!)}\\.bad$`))
      }
      expect(listing(stateDir)).toEqual(files.map((f) => `${path.basename(f)}.bad`).sort())

      const second = yield* withRegistryOn(stateDir, () => Effect.void)
      expect(warningsOf(second.logs)).toEqual([])
      expect(yield* Journal.readAll(stateDir)).toEqual([])
    })))
})

describe("PID namespaces", () => {
  it.live("a journal of another PID namespace is not reaped or removed, even where its pid is dead here", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const supervisor = yield* deadPid
      // numbers that would match here: but they are the other namespace's, and mean other processes
      const lookalike = yield* taggedSleep(supervisor, "s1")
      const foreign = craft(stateDir, journal(supervisor, [shellEntry(supervisor, "s1", lookalike.pid!)], { pidns: ownPidNamespace + 1 }))
      expect(path.basename(foreign)).toBe(`${ownPidNamespace + 1}-${supervisor}.json`)

      const { logs } = yield* withRegistryOn(stateDir, (registry) => Effect.succeed(registry.supervisor))
      expect(isRunning(lookalike.pid!)).toBe(true)
      expect(fs.existsSync(foreign)).toBe(true)
      expect(warningsOf(logs)).toEqual([])
    })))
})

describe.skipIf(!canMakeReadOnly)(`unwritable places ${readOnlyReason}`, () => {
  it.live("a read-only state directory is refused, naming it and CORRAL_STATE_DIR", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      fs.mkdirSync(stateDir, { mode: 0o700 })
      yield* readOnly(stateDir)
      const error = yield* buildFailure(stateDir)
      expect(error).toMatchObject({ _tag: "StateDirError", path: stateDir })
      expect(error.message).toBe(
        `cannot use the state directory ${stateDir}: ${isRoot ? "it is on a read-only file system" : "permission denied"}. ` +
          "Set CORRAL_STATE_DIR to a writable directory of your own"
      )
    })))

  it.live("a state directory that cannot be created is refused, naming the part that failed", () =>
    Effect.scoped(Effect.gen(function*() {
      const parent = yield* tempStateDir
      fs.mkdirSync(parent, { mode: 0o700 })
      yield* readOnly(parent)
      // as under an unwritable HOME: ~/.local/state/corral
      const stateDir = path.join(parent, ".local", "state", "corral")
      const error = yield* buildFailure(stateDir)
      expect(error.message).toBe(
        `cannot use the state directory ${stateDir}: ${isRoot ? "it is on a read-only file system" : "permission denied"} ` +
          `(at ${path.join(parent, ".local")}). Set CORRAL_STATE_DIR to a writable directory of your own`
      )
    })))

  it.live("a journal that can no longer be written: shells still start, and it is said once", () =>
    Effect.scoped(Effect.gen(function*() {
      const stateDir = yield* tempStateDir
      const { logs, result } = yield* withRegistryOn(stateDir, (registry, logs) =>
        Effect.gen(function*() {
          yield* readOnly(Journal.directory(stateDir))
          const a = yield* registry.start({ command: ["sleep", "300"] }, { owner })
          yield* eventually("the first failed write", Effect.sync(() => warningsOf(logs).length > 0 || undefined))
          const b = yield* registry.start({ command: ["sleep", "300"] }, { owner })
          return [a, b].map((s) => isRunning(s.pid))
        }).pipe(Effect.scoped))
      expect(result).toEqual([true, true])
      const warnings = warningsOf(logs)
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toMatch(new RegExp(`^cannot write the journal ${journalOf(stateDir, process.pid)}: `))
      expect(warnings[0]).toContain("if corral and its watcher are both killed, these shells keep running")
    })))
})
