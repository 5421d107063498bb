/**
 * Every background shell on the machine: each supervisor found in the state
 * directory (by its journal or its control socket) is asked over its socket.
 * A supervisor that died is read from its journal instead: its shells that
 * still run, with pid, pgid and start time matching, are orphans, and only
 * those can be stopped directly. A supervisor of another PID namespace is only
 * ever asked: its pids are not ours, so its journal is never acted on.
 *
 * A shell's global id is `<supervisor pid>:<registry id>`, like `4242:s1`:
 * unique across supervisors, and the `CORRAL_SHELL_ID` of its processes.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Api from "@corral/core/ControlApi"
import * as GroupStop from "@corral/core/GroupStop"
import * as Journal from "@corral/core/Journal"
import { Limits } from "@corral/core/Limits"
import { ProcessTable } from "@corral/core/ProcessTable"
import * as StateDir from "@corral/core/StateDir"
import * as Http from "./controlHttp.js"
import { oneLine } from "./table.js"

import { ShellInfo, Supervisor } from "@corral/core/Shell"
import type { Delivered, Input, StopReport, TerminalSize } from "@corral/core/Shell"
/** What a supervisor did with input (see `ShellInput.Delivered`). */
export type { Delivered } from "@corral/core/Shell"

export type { StopReport, Supervisor } from "@corral/core/Shell"

export const SupervisorState = Schema.Literal(
  /** It answered over its socket. */
  "live",
  /** Its process is gone; its shells that still run are orphans. */
  "dead",
  /**
   * Its process is alive but did not answer, or it runs in another PID
   * namespace; its shells are as its journal last recorded them.
   */
  "unreachable"
)
export type SupervisorState = typeof SupervisorState.Type

export const SupervisorView = Schema.Struct({
  supervisor: Supervisor,
  socket: Schema.String,
  state: SupervisorState,
  /** Why an unreachable supervisor did not answer. */
  problem: Schema.optional(Schema.String)
})
export interface SupervisorView extends Schema.Schema.Type<typeof SupervisorView> {}

export const Reach = Schema.Literal("live", "orphaned", "unreachable")
export type Reach = typeof Reach.Type

export const ShellEntry = Schema.Struct({
  /** `<supervisor pid>:<registry id>`. */
  id: Schema.String,
  supervisor: Supervisor,
  reach: Reach,
  info: ShellInfo
})
export interface ShellEntry extends Schema.Schema.Type<typeof ShellEntry> {}

/** Every supervisor found, and all their shells: what `corral ls --json` prints. */
export const Snapshot = Schema.Struct({
  supervisors: Schema.Array(SupervisorView),
  shells: Schema.Array(ShellEntry)
})
export interface Snapshot extends Schema.Schema.Type<typeof Snapshot> {}

export interface Shown {
  readonly entry: ShellEntry
  /** None for a shell whose supervisor cannot be asked: its output lives there. */
  readonly output: Option.Option<{ readonly text: string; readonly dropped: number }>
}

export interface Stopped {
  /** The shell after the stop. */
  readonly entry: ShellEntry
  readonly report: StopReport
  /** False when the shell had already ended: the report is then the one of its earlier stop. */
  readonly wasActive: boolean
}

export interface StoppedAll {
  readonly stopped: ReadonlyArray<Stopped>
  /** Supervisors whose shells could not be stopped: they are alive but do not answer. */
  readonly unreachable: ReadonlyArray<SupervisorView>
}

export const globalIdPattern = /^([1-9][0-9]{0,9}):(s[1-9][0-9]{0,8})$/

export class InvalidShellId extends Data.TaggedError("InvalidShellId")<{ readonly id: string }> {
  override get message() {
    return `invalid shell id ${JSON.stringify(this.id)}: expected <supervisor pid>:<shell id>, like 4242:s1, ` +
      "as `corral ls` shows it (it is also the CORRAL_SHELL_ID of the shell's processes)"
  }
}

export class NoSuchShell extends Data.TaggedError("NoSuchShell")<{ readonly id: string; readonly known: ReadonlyArray<string> }> {
  override get message() {
    const known = this.known.length === 0 ? "there are no background shells on this machine" : `known ids: ${this.known.join(", ")}`
    return `no shell with id ${this.id} (${known})`
  }
}

export class SupervisorUnreachable extends Data.TaggedError("SupervisorUnreachable")<{
  readonly id: string
  readonly supervisor: Supervisor
  readonly reason: string
}> {
  override get message() {
    return `supervisor ${this.supervisor.pid} (${oneLine(this.supervisor.name)}) of shell ${this.id} is alive but does not answer: ` +
      `${this.reason}. It still owns the shell; try again, or stop that process`
  }
}

export class OutputUnavailable extends Data.TaggedError("OutputUnavailable")<{ readonly id: string; readonly supervisor: Supervisor }> {
  override get message() {
    return `the output of shell ${this.id} is held by its supervisor ${this.supervisor.pid} (${oneLine(this.supervisor.name)}), ` +
      "which died or does not answer: it is gone or out of reach. `corral stop` still works on an orphaned shell"
  }
}

/** The shell takes no input: it has no stdin pipe or terminal, or its stdin was closed. */
export class NoInput extends Data.TaggedError("NoInput")<{ readonly id: string }> {
  override get message() {
    return `shell ${this.id} takes no input: it was started without a stdin pipe or a terminal, ` +
      "or its stdin was closed (end of file); the bash tool's background shells keep stdin open"
  }
}

/** The shell has no terminal to resize: it was started without one, or it has ended. */
export class NoTerminal extends Data.TaggedError("NoTerminal")<{ readonly id: string }> {
  override get message() {
    return `shell ${this.id} has no terminal to resize: it was started without one (the bash tool's tty: true), or it has ended`
  }
}

/** The control endpoint answered in a way corral does not understand. */
export class ControlError extends Data.TaggedError("ControlError")<{ readonly socket: string; readonly reason: string }> {
  override get message() {
    return `the control endpoint at ${this.socket} failed: ${this.reason}`
  }
}

export type FindError = InvalidShellId | NoSuchShell

export interface ClientOptions {
  /** The one directory to read; default: those of `StateDir.searched`. */
  readonly stateDir?: string | undefined
  /** How long a listing waits for each supervisor; default 3 s. */
  readonly timeout?: Duration.DurationInput | undefined
}

export class ControlClient extends Context.Tag("@corral/cli/ControlClient")<ControlClient, {
  /** The state directory; supervisors are also looked for in `searched`. */
  readonly stateDir: string
  readonly searched: ReadonlyArray<string>
  readonly snapshot: Effect.Effect<Snapshot>
  readonly show: (id: string) => Effect.Effect<Shown, FindError | ControlError>
  /** The retained output then live output, until the shell's output ends. */
  readonly follow: (id: string) => Stream.Stream<Uint8Array, FindError | OutputUnavailable | ControlError>
  readonly stop: (id: string) => Effect.Effect<Stopped, FindError | SupervisorUnreachable | ControlError>
  /** Input to a live shell, delivered as `ShellInput.send` does: the operator's, whichever agent owns it. */
  readonly write: (
    id: string,
    input: Input
  ) => Effect.Effect<Delivered, FindError | OutputUnavailable | NoInput | ControlError>
  /** A new size for a live shell's terminal, the operator's, whichever agent owns it. */
  readonly resize: (id: string, size: TerminalSize) => Effect.Effect<void, FindError | OutputUnavailable | NoTerminal | ControlError>
  readonly stopAll: Effect.Effect<StoppedAll, ControlError>
}>() {
  static readonly layer = (options: ClientOptions = {}) => Layer.effect(ControlClient, make(options))

  /** The process table for this platform, limits from the environment (they apply to orphans' stops). */
  static readonly layerConfig = (options: ClientOptions = {}) =>
    ControlClient.layer(options).pipe(Layer.provide(Layer.mergeAll(ProcessTable.layer, Limits.layerConfig())))
}

const bySupervisorThenId = (a: ShellEntry, b: ShellEntry) =>
  a.supervisor.startedAt - b.supervisor.startedAt || a.supervisor.pid - b.supervisor.pid ||
  Number(a.info.id.slice(1)) - Number(b.info.id.slice(1))

const entryOf = (supervisor: Supervisor, reach: Reach) => (info: ShellInfo): ShellEntry => ({
  id: `${supervisor.pid}:${info.id}`,
  supervisor,
  reach,
  info
})

/** What a journal says about a shell that was active when it was last written. */
const journalInfo = (shell: Journal.JournalShell): ShellInfo => ({
  id: shell.id,
  tag: shell.tag,
  pid: shell.pid,
  command: shell.command,
  cwd: shell.cwd,
  name: shell.name,
  owner: shell.owner,
  containment: GroupStop.backendOf(Journal.targetOf(shell)),
  startedAt: shell.startedAt,
  status: { _tag: "Running" }
})

const stoppedOf = (supervisor: Supervisor) => (answer: typeof Api.Stopped.Type): Stopped => ({
  entry: entryOf(supervisor, "live")(answer.shell),
  report: answer.report,
  wasActive: answer.wasActive
})

interface Found {
  readonly view: SupervisorView
  readonly shells: ReadonlyArray<ShellEntry>
  /** Verified orphans, with their journal records. */
  readonly orphans: ReadonlyArray<Journal.JournalShell>
  /** What the journal recorded of a dead supervisor: whose the orphans are. */
  readonly recorded?: Journal.Supervisor | undefined
}

/**
 * The names (`Journal.nameOf`) of the control sockets in the state
 * directory. Anything named like one that is not a socket of this user is
 * set aside: corral never talks to a socket someone else put there.
 */
const socketNames = Effect.fn("ControlClient.socketNames")(function*(stateDir: string) {
  const dir = Journal.directory(stateDir)
  const files = yield* Effect.sync(() => {
    try {
      return fs.readdirSync(dir).filter((file) => file.endsWith(".sock") && Journal.namePattern.test(file.slice(0, -5)))
    } catch {
      return []
    }
  })
  const names: Array<string> = []
  for (const file of files) {
    const checked = StateDir.checkSocket(path.join(dir, file))
    if (Either.isRight(checked)) names.push(file.slice(0, -5))
    else yield* Journal.refuse(path.join(dir, file), checked.left)
  }
  return names
})

/** A supervisor found in a state directory, by its journal or its socket. */
interface Listed {
  readonly dir: string
  readonly name: string
  readonly journal: Journal.JournalEntry | undefined
}

/** The namespace and pid a supervisor's name holds. */
const partsOf = (name: string) => {
  const [, namespace, pid] = Journal.namePattern.exec(name)!
  return { namespace: Number(namespace), pid: Number(pid) }
}

/**
 * A supervisor being killed closes its socket before the kernel shows it
 * dead (its other threads must exit first, which under load takes a while):
 * it counts as alive only if it still is up to 2 s later.
 */
const stillAlive = (supervisor: Journal.Supervisor) =>
  // a loop, not Effect.repeat with a schedule: that returns the schedule's count, which is truthy once it
  // was alive at the first look, so a supervisor dying as ls asked it showed as "no answer"
  Effect.gen(function*() {
    for (let look = 0; look < 40; look++) {
      if (!(yield* Journal.isAlive(supervisor))) return false
      yield* Effect.sleep("50 millis")
    }
    return true
  })

const protocolError = (error: Http.NoAnswer | Http.Refused) =>
  new ControlError({ socket: error.socket, reason: error._tag === "NoAnswer" ? error.reason : error.body.message })

/** Someone else's directory, or a link, is refused before anything in it is read. */
const checkDir = (dir: string) => Effect.zipRight(StateDir.check(dir), StateDir.check(Journal.directory(dir)))

/** What every look at the supervisors works with, settled once by `make`. */
interface Env {
  readonly searched: ReadonlyArray<string>
  readonly timeout: Duration.DurationInput
  readonly context: Context.Context<ProcessTable | Limits>
  /** Our own PID namespace: pids of a supervisor in another one name other processes here. */
  readonly namespace: number
}

/** One supervisor, by name: asked over its socket, else read from its journal. */
const visit = (env: Env) => ({ dir, journal, name }: Listed) =>
  Effect.gen(function*() {
    const socket = Api.socketPath(dir, name)
    const answer = yield* Effect.either(Http.ask(socket, Http.list, env.timeout))
    if (Either.isRight(answer)) {
      const { shells, supervisor } = answer.right
      return Option.some<Found>({ view: { supervisor, socket, state: "live" }, shells: shells.map(entryOf(supervisor, "live")), orphans: [] })
    }
    // a socket without a journal: a supervisor that died and was cleaned up, or one we cannot identify
    if (journal === undefined) return Option.none()
    const reason = answer.left._tag === "NoAnswer" ? answer.left.reason : answer.left.body.message
    return yield* fromJournal(env, socket, journal, reason)
  }).pipe(Effect.provide(env.context))

/** A supervisor that did not answer, as its journal tells it: unreachable while it lives, else dead with its orphans. */
const fromJournal = (env: Env, socket: string, journal: Journal.JournalEntry, reason: string) =>
  Effect.gen(function*() {
    const supervisor = journal.supervisor
    // its pids name other processes here: whether it lives, and what is its, cannot be told from here
    const foreign = supervisor.pidns !== env.namespace
    if (foreign || (yield* stillAlive(supervisor))) {
      const problem = foreign
        ? `${reason}, and it runs in another PID namespace (pid:[${supervisor.pidns}]), so corral leaves its shells alone`
        : reason
      return Option.some<Found>({
        view: { supervisor, socket, state: "unreachable", problem },
        shells: journal.shells.map(journalInfo).map(entryOf(supervisor, "unreachable")),
        orphans: []
      })
    }
    const orphans = yield* Effect.filter(journal.shells, Journal.verify(supervisor))
    if (orphans.length === 0) return Option.none()
    return Option.some<Found>({
      view: { supervisor, socket, state: "dead" },
      shells: orphans.map(journalInfo).map(entryOf(supervisor, "orphaned")),
      orphans,
      recorded: supervisor
    })
  })

/** Journals and sockets by supervisor name, in each directory: each supervisor once, whichever of the two it left. */
const supervisorsIn = (searched: ReadonlyArray<string>) =>
  Effect.map(Effect.forEach(searched, (dir) =>
    Effect.gen(function*() {
      const journals = new Map((yield* Journal.readAll(dir)).map((l) => [l.name, l.entry]))
      const names = new Set([...journals.keys(), ...(yield* socketNames(dir))])
      return [...names].map((name): Listed => ({ dir, name, journal: journals.get(name) }))
    })), (listed) => listed.flat())

/** Every supervisor found, oldest first, and the shells each has; `find` asks only the ones an id can belong to. */
const discovery = (env: Env) => {
  const supervisors = supervisorsIn(env.searched)
  const visitAll = Effect.gen(function*() {
    const found = yield* Effect.forEach(yield* supervisors, visit(env), { concurrency: "unbounded" })
    return found.flatMap(Option.toArray).sort((a, b) =>
      a.view.supervisor.startedAt - b.view.supervisor.startedAt || a.view.supervisor.pid - b.view.supervisor.pid
    )
  })
  const snapshot = Effect.map(visitAll, (found): Snapshot => ({
    supervisors: found.map((f) => f.view),
    shells: found.flatMap((f) => f.shells).sort(bySupervisorThenId)
  }))
  const notFound = (id: string) => Effect.flatMap(snapshot, (s) => Effect.fail(new NoSuchShell({ id, known: s.shells.map((e) => e.id) })))
  const refusedAsNotFound = (id: string) => (error: Http.NoAnswer | Http.Refused): Effect.Effect<never, NoSuchShell | ControlError> =>
    error._tag === "Refused" && error.body.error === "UnknownShell" ? notFound(id) : Effect.fail(protocolError(error))
  /** The shell's supervisor and entry; only supervisors with that pid are asked, the one of this PID namespace first. */
  const find = (id: string) =>
    Effect.gen(function*() {
      const match = globalIdPattern.exec(id)
      if (match === null) return yield* new InvalidShellId({ id })
      const pid = Number(match[1])
      const local = match[2]!
      const ours = (name: string) => Number(partsOf(name).namespace === env.namespace)
      const candidates = (yield* supervisors).filter(({ name }) => partsOf(name).pid === pid).sort((a, b) => ours(b.name) - ours(a.name))
      for (const candidate of candidates) {
        const found = yield* visit(env)(candidate)
        const entry = Option.flatMap(found, (f) => Option.fromNullable(f.shells.find((s) => s.info.id === local)))
        if (Option.isSome(found) && Option.isSome(entry)) return { found: found.value, entry: entry.value, local }
      }
      return yield* notFound(id)
    })
  return { visitAll, snapshot, notFound, refusedAsNotFound, find }
}

type Discovery = ReturnType<typeof discovery>

/** Orphans are stopped here, together, after their identity was checked again just now. */
const stopOrphans = (env: Env, supervisor: Journal.Supervisor, orphans: ReadonlyArray<Journal.JournalShell>) =>
  Effect.gen(function*() {
    const verified = yield* Effect.filter(orphans, Journal.verify(supervisor))
    const reports = verified.length === 0 ? [] : yield* GroupStop.stopGroups(verified.map(Journal.targetOf))
    return verified.map((shell, i): Stopped => ({
      entry: entryOf(supervisor, "orphaned")(journalInfo(shell)),
      report: reports[i]!,
      wasActive: true
    }))
  }).pipe(Effect.provide(env.context))

/** One shell stopped by its supervisor, or here if it is an orphan. */
const stopOne = (env: Env, d: Discovery) =>
  Effect.fn("ControlClient.stop")(function*(id: string) {
    const { entry, found, local } = yield* d.find(id)
    switch (found.view.state) {
      case "unreachable":
        return yield* new SupervisorUnreachable({ id, supervisor: entry.supervisor, reason: found.view.problem ?? "" })
      case "dead": {
        const orphan = found.orphans.filter((o) => o.id === local)
        const [stopped] = found.recorded === undefined ? [] : yield* stopOrphans(env, found.recorded, orphan)
        return stopped ?? (yield* d.notFound(id))
      }
      case "live": {
        const answer = yield* Http.ask(found.view.socket, Http.stop(local)).pipe(Effect.catchAll(d.refusedAsNotFound(id)))
        return stoppedOf(entry.supervisor)(answer)
      }
    }
  })

/** Every shell of every supervisor that can be reached, each stopped by its own supervisor, orphans here. */
const stopEverything = (env: Env, d: Discovery) => {
  const stopEvery = (found: Found) =>
    Effect.gen(function*() {
      switch (found.view.state) {
        case "unreachable":
          return []
        case "dead":
          return found.recorded === undefined ? [] : yield* stopOrphans(env, found.recorded, found.orphans)
        case "live": {
          const answer = yield* Http.ask(found.view.socket, Http.stopAll).pipe(Effect.mapError(protocolError))
          return answer.stopped.map(stoppedOf(found.view.supervisor))
        }
      }
    })
  return Effect.gen(function*() {
    const found = yield* d.visitAll
    const stopped = yield* Effect.forEach(found, stopEvery, { concurrency: "unbounded" })
    return {
      stopped: stopped.flat().sort((a, b) => bySupervisorThenId(a.entry, b.entry)),
      unreachable: found.map((f) => f.view).filter((v) => v.state === "unreachable")
    } satisfies StoppedAll
  }).pipe(Effect.withSpan("ControlClient.stopAll"))
}

/** A live shell's output, retained then live, through its supervisor's socket. */
const followOne = (d: Discovery) => (id: string) =>
  Stream.unwrap(Effect.gen(function*() {
    const { entry, found, local } = yield* d.find(id)
    if (entry.reach !== "live") return yield* new OutputUnavailable({ id, supervisor: entry.supervisor })
    return Stream.catchAll(Http.follow(found.view.socket, local), (error) => Stream.fromEffect(d.refusedAsNotFound(id)(error)))
  }))

const showOne = (d: Discovery) =>
  Effect.fn("ControlClient.show")(function*(id: string) {
    const { entry, found, local } = yield* d.find(id)
    if (entry.reach !== "live") return { entry, output: Option.none() } satisfies Shown
    const answer = yield* Http.ask(found.view.socket, Http.show(local)).pipe(Effect.catchAll(d.refusedAsNotFound(id)))
    return {
      entry: entryOf(answer.supervisor, "live")(answer.shell),
      output: Option.some({ text: answer.output, dropped: answer.dropped })
    } satisfies Shown
  })

/** Asks a live shell's supervisor, with its refusal `refused` as `asError`. */
const askLive = (d: Discovery) =>
<A, E>(
  id: string,
  request: (local: string) => Http.Request<A>,
  refused: "NoStdin" | "NoTerminal",
  asError: () => E
) =>
  Effect.gen(function*() {
    const { entry, found, local } = yield* d.find(id)
    if (entry.reach !== "live") return yield* new OutputUnavailable({ id, supervisor: entry.supervisor })
    return yield* Http.ask(found.view.socket, request(local)).pipe(
      Effect.catchAll((error): Effect.Effect<never, NoSuchShell | ControlError | E> =>
        error._tag === "Refused" && error.body.error === refused ? Effect.fail(asError()) : d.refusedAsNotFound(id)(error)
      )
    )
  })

const writeOne = (d: Discovery) =>
  Effect.fn("ControlClient.write")(function*(id: string, input: Input) {
    const answer = yield* askLive(d)(id, (local) => Http.stdin(local, input), "NoStdin", () => new NoInput({ id }))
    return answer.delivered
  })

const resizeOne = (d: Discovery) =>
  Effect.fn("ControlClient.resize")(function*(id: string, size: TerminalSize) {
    yield* askLive(d)(id, (local) => Http.resize(local, size), "NoTerminal", () => new NoTerminal({ id }))
  })

const make = Effect.fn("ControlClient.make")(function*(options: ClientOptions) {
  const dirs = options.stateDir === undefined ? yield* StateDir.searched : [options.stateDir]
  const stateDir = dirs[0]!
  yield* checkDir(stateDir)
  // a directory looked in besides the configured one is left out if it is refused
  const searched = [stateDir, ...(yield* Effect.filter(dirs.slice(1), (dir) => Effect.isSuccess(checkDir(dir))))]
  const context = yield* Effect.context<ProcessTable | Limits>()
  const env: Env = { searched, timeout: options.timeout ?? Duration.seconds(3), context, namespace: yield* Effect.provide(Journal.ownNamespace, context) }
  const d = discovery(env)
  return ControlClient.of({
    stateDir,
    searched,
    snapshot: d.snapshot,
    show: showOne(d),
    follow: followOne(d),
    stop: stopOne(env, d),
    write: writeOne(d),
    resize: resizeOne(d),
    stopAll: stopEverything(env, d)
  })
})
