/**
 * The journal of live groups: one private file per supervisor, rewritten on
 * every change. When a supervisor and its watcher both die, the next registry
 * to start reads the files of dead supervisors and stops what they left,
 * only where pid, pgid, start time, tag and uid all still match.
 *
 * Every journal is untrusted input: it is read only if it is a regular file
 * of this user, named after the supervisor it describes, and decodes as this
 * version's schema. Anything else is set aside once, with a warning. A
 * journal is named `<pid namespace inode>-<pid>.json`: supervisors in other
 * PID namespaces share the directory, and their pids are not ours.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { StopTarget } from "./GroupStop.js"
import * as GroupStop from "./GroupStop.js"
import { isGone, ProcessTable } from "./ProcessTable.js"
import * as Shell from "./Shell.js"
import type { StopReport } from "./Shell.js"
import * as StateDir from "./StateDir.js"
import * as UntrustedJson from "./UntrustedJson.js"

/** Bumped when the format changes; journals of other versions are set aside. */
export const version = 2

const Pid = Shell.Pid

export const JournalShell = Schema.Struct({
  /** The registry's id, `s1`. */
  id: Schema.String.pipe(Schema.pattern(/^s[1-9][0-9]{0,8}$/)),
  /** `CORRAL_SHELL_ID` carried by every process of the shell: `<supervisor key>:<id>`. */
  tag: Schema.String,
  /** Leader pid, which is also the group and session id; never 1, which would make the group every process. */
  pid: Pid.pipe(Schema.greaterThan(1)),
  leaderStartTime: Schema.NullOr(Schema.Number),
  /** Process-table time at or before the group's birth. */
  bornAfter: Schema.Number,
  /** The shell's cgroup, when it was held in one. */
  cgroup: Schema.optional(Schema.String),
  /** Set when it was held in a PID namespace of its own. */
  pidns: Schema.optional(Schema.Literal(true)),
  /** Set when its leader was corral's init, a child subreaper (procScan, ADR 58). */
  reaper: Schema.optional(Schema.Literal(true)),
  command: Schema.String,
  cwd: Schema.String,
  owner: Schema.String,
  name: Schema.optional(Schema.String),
  startedAt: Schema.Number
})
export interface JournalShell extends Schema.Schema.Type<typeof JournalShell> {}

/** The supervisor as `corral ls` shows it (`Shell.Supervisor`), and what its journal needs besides. */
export const Supervisor = Schema.Struct({
  ...Shell.Supervisor.fields,
  /** Set when another registry was already alive in the same process. */
  instance: Schema.optional(Schema.Int.pipe(Schema.between(1, 999_999))),
  /** The user it ran as: only processes of this uid are ever signalled on its behalf. */
  uid: Schema.Int.pipe(Schema.nonNegative()),
  /** The inode of its PID namespace (`/proc/self/ns/pid`), 0 where unknown. */
  pidns: Schema.Int.pipe(Schema.nonNegative()),
  socket: Schema.optional(Schema.String)
})
export interface Supervisor extends Schema.Schema.Type<typeof Supervisor> {}

export const JournalEntry = Schema.Struct({
  version: Schema.Literal(version),
  supervisor: Supervisor,
  shells: Schema.Array(JournalShell)
})
export interface JournalEntry extends Schema.Schema.Type<typeof JournalEntry> {}

/** A journal as found in the state directory: its file name (without `.json`) and what it says. */
export interface Listed {
  readonly name: string
  readonly entry: JournalEntry
}

export class JournalWriteError extends Data.TaggedError("JournalWriteError")<{ readonly path: string; readonly reason: string }> {
  override get message() {
    return `cannot write the journal ${this.path}: ${this.reason}`
  }
}

export const directory = (stateDir: string) => path.join(stateDir, "supervisors")

/** The pid, or `<pid>.<instance>` for a second registry in one process: prefixes its tags. */
export const keyOf = (supervisor: Pick<Supervisor, "pid" | "instance">): string =>
  supervisor.instance === undefined || supervisor.instance <= 1 ? `${supervisor.pid}` : `${supervisor.pid}.${supervisor.instance}`

/** `<pid namespace>-<key>`: names the supervisor's journal and control socket. */
export const nameOf = (supervisor: Pick<Supervisor, "pid" | "instance" | "pidns">): string =>
  `${supervisor.pidns}-${keyOf(supervisor)}`

/** What `nameOf` makes, and nothing else: no separator, no dot segment, no other supervisor's file. */
export const namePattern = /^(0|[1-9][0-9]{0,19})-([1-9][0-9]{0,9})(\.[1-9][0-9]{0,5})?$/

const checkedName = (name: string) => {
  if (!namePattern.test(name)) throw new Error(`not a supervisor's name: ${JSON.stringify(name)}`)
  return name
}

export const fileOf = (stateDir: string, name: string) => path.join(directory(stateDir), `${checkedName(name)}.json`)

const encodeEntry = Schema.encodeSync(Schema.parseJson(JournalEntry))

/** Writes a supervisor's journal; `directory(stateDir)` must exist (`StateDir.ensure`). */
export const write = (stateDir: string, entry: JournalEntry): Effect.Effect<void, JournalWriteError> => {
  const file = fileOf(stateDir, nameOf(entry.supervisor))
  return Effect.try({
    // encoded through the schema it is read with: what is written is what a reader accepts
    try: () => StateDir.writePrivate(file, encodeEntry(entry)),
    catch: (error) => new JournalWriteError({ path: file, reason: StateDir.reasonOf(error, path.dirname(file)) })
  })
}

/** Deletes a supervisor's journal, and the control socket it may have left, by its name. */
export const remove = (stateDir: string, name: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const files = [fileOf(stateDir, name), path.join(directory(stateDir), `${name}.sock`)]
    for (const file of files) {
      try {
        fs.rmSync(file, { force: true })
      } catch (error) {
        return Effect.logWarning(`cannot remove ${file}: ${StateDir.reasonOf(error, file)}`)
      }
    }
    return Effect.void
  })

/** A journal is small: a hostile file cannot make a reader allocate without bound. */
const maxBytes = 16 * 1024 * 1024

/** A journal nests five levels; a hostile one thousands deep would overflow the stack of its decode's error message. */
const maxDepth = 16

const firstIssue = (error: ParseResult.ParseError) => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  return issue === undefined ? error.message : `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`
}

const decodeJson = Schema.decodeUnknownEither(Schema.parseJson())
const decodeEntry = Schema.decodeUnknownEither(JournalEntry)

/** The journal in `dir/file`, or why it is refused. */
const readOne = (dir: string, file: string): Either.Either<Listed, string> =>
  Either.gen(function*() {
    const name = file.slice(0, -".json".length)
    if (!namePattern.test(name)) return yield* Either.left("its name is not <pid namespace>-<pid>.json")
    const text = yield* StateDir.readPrivate(path.join(dir, file), maxBytes)
    const json = yield* Either.mapLeft(decodeJson(text), (e) => `it is not JSON: ${firstIssue(e)}`)
    if (UntrustedJson.nestedDeeperThan(json, maxDepth)) return yield* Either.left(`it nests values over ${maxDepth} levels deep, which no journal does`)
    const found = typeof json === "object" && json !== null && "version" in json ? json.version : undefined
    if (found !== version) {
      return yield* Either.left(`it is not a version ${version} journal (version ${JSON.stringify(found)})`)
    }
    const entry = yield* Either.mapLeft(decodeEntry(json), (e) => `it is malformed: ${firstIssue(e)}`)
    if (nameOf(entry.supervisor) !== name) {
      return yield* Either.left(`it describes supervisor ${nameOf(entry.supervisor)}, not the one its name says`)
    }
    if (entry.supervisor.uid !== StateDir.ownUid()) {
      return yield* Either.left(`it records uid ${entry.supervisor.uid}, but belongs to uid ${StateDir.ownUid()}`)
    }
    const mistagged = entry.shells.find((s) => s.tag !== `${keyOf(entry.supervisor)}:${s.id}`)
    if (mistagged !== undefined) {
      return yield* Either.left(`its shell ${mistagged.id} has tag ${JSON.stringify(mistagged.tag)}, not its supervisor's`)
    }
    return { name, entry }
  })

/** Whether nothing is at `file` any more, not even a link. */
const vanished = (file: string) => {
  try {
    fs.lstatSync(file)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT"
  }
}

/**
 * Moves a refused file aside and says so, once: the next read no longer sees
 * it. One gone since it was listed is no news: its supervisor removed it as
 * it left (a journal, a socket), and there is nothing to move or delete.
 */
export const refuse = (file: string, reason: string) =>
  Effect.suspend(() => {
    if (vanished(file)) return Effect.void
    const failed = StateDir.setAside(file)
    return Effect.logWarning(
      failed === undefined
        ? `ignored ${file}: ${reason}; moved it to ${path.basename(file)}.bad`
        : `ignored ${file}: ${reason}; cannot move it aside (${failed}): delete it`
    )
  })

/**
 * Every journal in the state directory that can be trusted. The others (not
 * ours, a link, not a journal of this version, not named after the
 * supervisor they describe) are set aside with a warning (see `refuse`).
 */
export const readAll = Effect.fn("Journal.readAll")(function*(stateDir: string) {
  const dir = directory(stateDir)
  const files = yield* Effect.sync(() => {
    try {
      return fs.readdirSync(dir).filter((file) => file.endsWith(".json")).sort()
    } catch {
      return []
    }
  })
  const listed: Array<Listed> = []
  for (const file of files) {
    const result = readOne(dir, file)
    if (Either.isRight(result)) listed.push(result.right)
    else yield* refuse(path.join(dir, file), result.left)
  }
  return listed as ReadonlyArray<Listed>
})

/** The inode of this process's PID namespace, 0 where the table cannot tell. */
export const ownNamespace = Effect.flatMap(ProcessTable, (table) => table.pidNamespaceOf(process.pid)).pipe(
  Effect.map(Option.getOrElse(() => 0))
)

/** Whether the journal's supervisor is the same live process (pid and start time); meaningful in its own namespace only. */
export const isAlive = (supervisor: Supervisor) =>
  Effect.flatMap(ProcessTable, (table) => table.lookup(supervisor.pid)).pipe(
    Effect.map(Option.exists((p) => p.startTime === supervisor.startTime && !isGone(p)))
  )

export const targetOf = (shell: JournalShell): StopTarget => ({
  pgid: shell.pid,
  sid: shell.pid,
  startTime: shell.bornAfter,
  shellId: shell.tag,
  cgroup: shell.cgroup,
  pidns: shell.pidns,
  reaper: shell.reaper
})

/**
 * Whether the shell's group is still the one the journal recorded: its
 * leader alive with the same pid, pgid and start time, or, once the leader
 * has exited, a member of its group born after it. Either way the process
 * must carry the shell's tag and run as the supervisor's uid: a pid reused by
 * someone else, even with the right numbers, is never signalled.
 */
export const verify = (supervisor: Supervisor) => (shell: JournalShell) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const isTheShells = (pid: number) =>
      Effect.gen(function*() {
        if (!Option.contains(yield* table.uidOf(pid), supervisor.uid)) return false
        return (yield* table.shellIdsOf(pid)).includes(shell.tag)
      })
    const leader = yield* table.lookup(shell.pid)
    if (Option.isSome(leader) && !isGone(leader.value)) {
      return leader.value.pgid === shell.pid && leader.value.startTime === shell.leaderStartTime &&
        (yield* isTheShells(shell.pid))
    }
    for (const p of yield* table.scan) {
      if (isGone(p) || p.pgid !== shell.pid || p.startTime < shell.bornAfter) continue
      if (yield* isTheShells(p.pid)) return true
    }
    return false
  })

export interface Reaped {
  readonly supervisor: Supervisor
  readonly shell: JournalShell
  readonly report: StopReport
}

/**
 * Stops what dead supervisors of this PID namespace left running, and
 * deletes their journals by the names they were listed under. A journal of
 * another namespace is left alone: its supervisor may be alive, and its pids
 * mean other processes here.
 */
export const reapDead = Effect.fn("Journal.reapDead")(function*(stateDir: string) {
  const namespace = yield* ownNamespace
  const reaped: Array<Reaped> = []
  for (const { entry, name } of yield* readAll(stateDir)) {
    if (entry.supervisor.pidns !== namespace) continue
    if (yield* isAlive(entry.supervisor)) continue
    const verified = yield* Effect.filter(entry.shells, verify(entry.supervisor))
    const reports = verified.length === 0 ? [] : yield* GroupStop.stopGroups(verified.map(targetOf))
    for (const [i, shell] of verified.entries()) {
      reaped.push({ supervisor: entry.supervisor, shell, report: reports[i]! })
      yield* Effect.logWarning(
        `reaped shell ${shell.tag} (${shell.command}) left by dead supervisor ${entry.supervisor.name} ` +
          `(pid ${entry.supervisor.pid}): ${reports[i]!.members} processes stopped`
      )
    }
    yield* remove(stateDir, name)
  }
  return reaped
})
