/**
 * The registry of background shells: ids, limits, lifetime, retention,
 * events and ownership. Releasing the layer stops every shell; a watcher
 * process and a journal stop them when the supervisor dies without that.
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Journal from "./Journal.js"
import { Limits } from "./Limits.js"
import type { ExitStatus, ProcessGroupError, SpawnSpec } from "./ProcessGroup.js"
import * as ProcessGroup from "./ProcessGroup.js"
import type { OutputChunk } from "./OutputBuffer.js"
import * as CommandShell from "./CommandShell.js"
import { Containment } from "./Containment.js"
import { ProcessTable } from "./ProcessTable.js"
import * as StateDir from "./StateDir.js"
import * as Watcher from "./Watcher.js"
import * as RegistryJournal from "./internal/registryJournal.js"
import * as ShellOutput from "./internal/shellOutput.js"

// declared once, as schemas, in Shell.ts; the registry's surface all the same
export { isActive, ShellInfo, ShellStatus, StopCause } from "./Shell.js"
import type { ShellInfo, ShellStatus, StopCause, StopReport } from "./Shell.js"
import { isActive } from "./Shell.js"

export type ShellEvent =
  | { readonly _tag: "Started"; readonly info: ShellInfo }
  /** The leader exited and members of its group still run (once per shell). */
  | { readonly _tag: "Lingering"; readonly info: ShellInfo }
  | { readonly _tag: "Exited"; readonly info: ShellInfo }
  | { readonly _tag: "Killed"; readonly info: ShellInfo; readonly report: StopReport }
  | { readonly _tag: "Dropped"; readonly id: string }

export type OutputMode = "new" | "tail" | "all"

export interface OutputOptions {
  /** `new` (default): what arrived since this reader's last read. */
  readonly mode?: OutputMode | undefined
  /** Lines for `tail` mode. */
  readonly lines?: number | undefined
  /** Keep only lines matching this pattern. */
  readonly filter?: string | undefined
  /** Wait until a new line matches, the shell ends, or `waitMs` passes. */
  readonly waitFor?: string | undefined
  readonly waitMs?: number | undefined
  /** Cursor owner for `new` mode; readers do not steal each other's output. */
  readonly reader?: string | undefined
}

export interface OutputResult {
  readonly text: string
  readonly info: ShellInfo
  /** Bytes dropped from the buffer before this reader saw them. */
  readonly dropped: number
  /** Bytes the shell has written since it started, kept or not. */
  readonly written: number
  /** With `waitFor`: which came first. */
  readonly waited?: "matched" | "exited" | "timeout" | undefined
}

export class UnknownShell extends Data.TaggedError("UnknownShell")<{
  readonly id: string
  readonly known: ReadonlyArray<string>
  readonly retention: Duration.Duration
}> {
  override get message() {
    const known = this.known.length === 0 ? "there are no shells" : `known ids: ${this.known.join(", ")}`
    const id = this.id.length <= 60 ? this.id : `${this.id.slice(0, 59)}…`
    return `no shell with id "${id}" (${known}). Ids belong to the process that started them, ` +
      `and a shell is dropped ${Duration.format(this.retention)} after it ends.`
  }
}

export class TooManyShells extends Data.TaggedError("TooManyShells")<{ readonly limit: number; readonly running: ReadonlyArray<ShellInfo> }> {
  override get message() {
    const list = this.running.map((s) => `${s.id} (${s.command.slice(0, 60)})`).join(", ")
    return `${this.limit} shells are already running, the limit: ${list}. Stop one you no longer need with kill, then start again.`
  }
}

export class NotOwner extends Data.TaggedError("NotOwner")<{ readonly id: string; readonly owner: string; readonly caller: string }> {
  override get message() {
    return `shell ${this.id} belongs to "${this.owner}", not "${this.caller}": only its owner can stop it`
  }
}

// defined beside the reads that raise them; the registry's public errors all the same
export { InvalidOption, InvalidPattern, MAX_PATTERN_CHARS } from "./internal/shellOutput.js"
import type { InvalidOption, InvalidPattern } from "./internal/shellOutput.js"

export class NoStdin extends Data.TaggedError("NoStdin")<{ readonly id: string }> {
  override get message() {
    return `shell ${this.id} takes no input: it was started without a stdin pipe (stdin: "pipe") or a terminal (tty), or its stdin was closed`
  }
}

export class RegistryClosed extends Data.TaggedError("RegistryClosed")<{}> {
  override get message() {
    return "the shell registry is shutting down: no new shell can start"
  }
}

export type StartError = ProcessGroupError | TooManyShells | RegistryClosed

export interface StartOptions {
  readonly owner: string
  readonly name?: string | undefined
}

export interface RegistryOptions {
  /** Shown by `corral ls`; default: the program's name. */
  readonly name?: string | undefined
  /** Watcher process and journal; default on. */
  readonly crashSafety?: boolean | undefined
  /**
   * The journal alone, with crash safety on; default on. Off, the watcher
   * still stops the shells if the supervisor dies, but nothing does if both
   * die: for a state directory that cannot be used.
   */
  readonly journal?: boolean | undefined
  /** Default: `StateDir.resolve`. */
  readonly stateDir?: string | undefined
  /**
   * The shell that runs command lines (`shell -c`) unless a start names its
   * own, by path or as resolved; default bash (see `CommandShell.resolveDefault`).
   */
  readonly shell?: string | CommandShell.CommandShell | undefined
}

export class ShellRegistry extends Context.Tag("@corral/core/ShellRegistry")<ShellRegistry, {
  readonly start: (spec: SpawnSpec, options: StartOptions) => Effect.Effect<ShellInfo, StartError>
  readonly output: (id: string, options?: OutputOptions) => Effect.Effect<OutputResult, UnknownShell | InvalidPattern | InvalidOption>
  readonly kill: (id: string, options: { readonly owner: string }) => Effect.Effect<StopReport, UnknownShell | NotOwner>
  /** Writes to the shell's stdin, or closes it with `eof`; only its owner may. */
  readonly write: (
    id: string,
    input: { readonly text?: string | undefined; readonly eof?: boolean | undefined },
    options: { readonly owner: string }
  ) => Effect.Effect<void, UnknownShell | NotOwner | NoStdin>
  /** Sends `signal` to the shell's whole process group (Ctrl-C is SIGINT); only its owner may. */
  readonly signal: (id: string, signal: NodeJS.Signals, options: { readonly owner: string }) => Effect.Effect<void, UnknownShell | NotOwner>
  /** Lines kept that `reader` has not read yet in `new` mode; reads nothing for it. */
  readonly unread: (id: string, reader: string) => Effect.Effect<number, UnknownShell>
  readonly info: (id: string) => Effect.Effect<ShellInfo, UnknownShell>
  readonly list: Effect.Effect<ReadonlyArray<ShellInfo>>
  /**
   * One shell's output as it arrives (with `retained`, from its oldest
   * retained byte), ending when its output ends. Read from the shell's buffer
   * as the stream is pulled, so a reader that stalls holds no output; one that
   * falls more than the buffer behind skips what was dropped meanwhile, and
   * the next chunk's offset jumps by that much.
   */
  readonly follow: (id: string, options?: { readonly retained?: boolean }) => Effect.Effect<Stream.Stream<OutputChunk>, UnknownShell>
  /** Lifecycle events; each subscriber sees each shell's events in order. Ends after the shutdown's last event. */
  readonly events: Stream.Stream<ShellEvent>
  /** Subscribes now, so no event after this point is missed. The stream ends after the shutdown's last event. */
  readonly subscribe: Effect.Effect<Stream.Stream<ShellEvent>, never, Scope.Scope>
  /** Subscribes now, as a queue to drain when the reader likes: no fiber needed to keep up. A queue has no end. */
  readonly subscribeQueue: Effect.Effect<Queue.Dequeue<ShellEvent>, never, Scope.Scope>
  /**
   * Stops every shell (cause `shutdown`), refuses starts from then on, and
   * ends the event streams after the shutdown's events. Releasing the layer
   * runs it; it runs once, and a second call waits for the first. For a
   * consumer of the events whose own release must still see the shutdown's
   * (`AcpShellRows.layer`): layers built on the registry are released
   * before it, so they run this first.
   */
  readonly shutdown: Effect.Effect<void>
  /**
   * Puts a group started outside the registry (a foreground command) under
   * the watcher for the scope's lifetime, so it too is stopped if the
   * supervisor dies.
   */
  readonly guard: (group: ProcessGroup.ProcessGroup) => Effect.Effect<void, never, Scope.Scope>
  /** The shell command lines run with, and a note when it is not bash. */
  readonly shell: CommandShell.CommandShell
  /** This supervisor's identity, as recorded in its journal. */
  readonly supervisor: Journal.Supervisor
  /**
   * Names the supervisor for `corral ls`, `show` and `top`, once it knows who
   * it serves (an MCP client's name arrives after the registry started).
   */
  readonly rename: (name: string) => Effect.Effect<void>
  readonly stateDir: string
}>() {
  static readonly layer = (options: RegistryOptions = {}) => Layer.scoped(ShellRegistry, make(options))

  /** Limits from the environment (see `Limits.layerConfig`), the process table for this platform. */
  static readonly layerConfig = (options: RegistryOptions = {}) =>
    ShellRegistry.layer(options).pipe(
      Layer.provide(Containment.layer().pipe(Layer.provideMerge(Layer.mergeAll(Limits.layerConfig(), ProcessTable.layer))))
    )
}

interface Shell {
  readonly id: string
  readonly group: ProcessGroup.ProcessGroup
  readonly scope: Scope.CloseableScope
  readonly base: Omit<ShellInfo, "status" | "endedAt">
  readonly status: Ref.Ref<ShellStatus>
  readonly endedAt: Ref.Ref<number | undefined>
  /** Completed once the shell has settled into a final status. */
  readonly settled: Deferred.Deferred<void>
  readonly cursors: Map<string, number>
}

const make = Effect.fn("ShellRegistry.make")(function*(options: RegistryOptions) {
  const limits = yield* Limits
  const containment = yield* Containment
  const context = yield* Effect.context<ProcessTable | Limits | Containment>()
  const shells = new Map<string, Shell>()
  const lifecycles = yield* FiberMap.make<string>()
  // Each event goes to two hubs: `hub` for subscribeQueue, a queue drained at
  // will, and `takes` for the streams, which the shutdown ends after its last
  // event (a queue cannot carry an end, a stream of Takes can)
  const hub = yield* PubSub.unbounded<ShellEvent>()
  const takes = yield* PubSub.unbounded<Take.Take<ShellEvent>>()
  let eventsEnded = false
  const publish = (...events: ReadonlyArray<ShellEvent>) =>
    events.length === 0 ? Effect.void : Effect.zipRight(PubSub.publishAll(hub, events), PubSub.publish(takes, Take.chunk(Chunk.fromIterable(events))))
  // a shell's final status and its event, and a drop and its event, are
  // published together, so every subscriber sees each shell's events in order
  const eventLock = yield* Effect.makeSemaphore(1)
  // starts hold one permit; shutdown takes them all, so it waits for starts in flight
  const startPermits = limits.maxShells * 4
  const gate = yield* Effect.makeSemaphore(startPermits)
  let closing = false
  // a lifecycle past its shell's stop waits out the retention, or the shutdown, whichever comes first
  const shuttingDown = yield* Deferred.make<void>()
  let counter = 0
  // ids of starts admitted under the cap and not yet registered: they count
  // against it from before their spawn, so concurrent starts cannot all pass
  // the check; admission is one at a time, the spawns are not
  const admitted = yield* Ref.make(HashSet.empty<string>())
  const admission = yield* Effect.makeSemaphore(1)

  let supervisor = yield* supervisorIdentity(options)
  const commandShell: CommandShell.CommandShell = options.shell === undefined
    ? CommandShell.resolveDefault()
    : typeof options.shell === "string"
    ? { path: options.shell }
    : options.shell
  const stateDir = options.stateDir ?? (yield* StateDir.resolve)
  const crashSafe = options.crashSafety !== false
  const journalled = crashSafe && options.journal !== false
  if (journalled) {
    yield* StateDir.ensure(stateDir)
    yield* StateDir.ensure(Journal.directory(stateDir))
    yield* Journal.reapDead(stateDir)
  }
  if (crashSafe) yield* containment.reapLeftovers
  const watcher = crashSafe ? Option.some(yield* Watcher.make) : Option.none()
  // the first filter or waitFor should not wait for a thread to start
  yield* ShellOutput.warm
  // spawns announce themselves to the watcher (see ProcessGroup.spawn)
  const spawnContext = Option.match(watcher, {
    onNone: () => context,
    onSome: (w) => Context.add(context, Watcher.Watcher, w)
  })
  const infoOf = (shell: Shell) =>
    Effect.map(Effect.all([Ref.get(shell.status), Ref.get(shell.endedAt)]), ([status, endedAt]): ShellInfo => ({
      ...shell.base,
      status,
      endedAt
    }))

  const journal = journalled
    ? yield* RegistryJournal.make({
      stateDir,
      supervisor: () => supervisor,
      // the shutdown removes the journal once it is done, not once per shell
      live: Effect.suspend(() => Effect.filter(shells.values(), (s) => Effect.map(Ref.get(s.status), isActive))).pipe(
        Effect.map((live) => live.map(journalShell))
      )
    })
    : RegistryJournal.disabled
  const journalChanged = journal.changed

  const lookup = (id: string) =>
    Effect.suspend(() => {
      const shell = shells.get(id)
      return shell === undefined ? Effect.fail(new UnknownShell({ id, known: [...shells.keys()], retention: limits.retention })) : Effect.succeed(shell)
    })

  const dropped = (shell: Shell) =>
    eventLock.withPermits(1)(Effect.suspend(() =>
      shells.delete(shell.id) ? publish({ _tag: "Dropped", id: shell.id }) : Effect.void
    ))

  /** Registered shells and admitted starts, each counted once. */
  const occupied = Effect.map(Ref.get(admitted), (ids) => shells.size + HashSet.size(HashSet.filter(ids, (id) => !shells.has(id))))

  /** Drops finished shells, oldest first, until one more fits under the cap. */
  const makeRoom = Effect.gen(function*() {
    const finished = yield* Effect.filter(shells.values(), (s) => Effect.map(Ref.get(s.status), (st) => !isActive(st)))
    const excess = (yield* occupied) + 1 - limits.maxShells
    for (const shell of finished.slice(0, Math.max(0, excess))) {
      yield* dropped(shell)
      // its lifecycle may still be closing the shell's scope: a start need not wait for that
      yield* Effect.forkDaemon(FiberMap.remove(lifecycles, shell.id))
    }
  })

  const markStopping = (shell: Shell, by: StopCause) =>
    Ref.update(shell.status, (s): ShellStatus => (s._tag === "Running" || s._tag === "Lingering" ? { _tag: "Stopping", by } : s))

  /**
   * Where a stop leaves the shell, or nothing if it has settled already. It
   * was killed by corral only if a stop was asked for and signalled someone;
   * a stop that found the group already empty means it ended by itself.
   */
  const finalStatus = (shell: Shell, report: StopReport) =>
    Effect.gen(function*() {
      const current = yield* Ref.get(shell.status)
      if (!isActive(current)) return Option.none()
      const exit = yield* shell.group.exitStatus
      const signal = Option.isSome(exit) && exit.value._tag === "Signaled" ? exit.value.signal : undefined
      const byCorral = current._tag === "Stopping" && report.signals.SIGTERM + report.signals.SIGKILL > 0
      return Option.some<ShellStatus>(
        byCorral
          ? { _tag: "Killed", signal: signal ?? (report.escalated ? "SIGKILL" : "SIGTERM"), by: current.by }
          : signal !== undefined
          ? { _tag: "Killed", signal }
          : { _tag: "Exited", code: Option.isSome(exit) && exit.value._tag === "Exited" ? exit.value.code : 0 }
      )
    })

  /**
   * Moves each shell to its final status once, whoever gets here first, and
   * publishes its event: many shells under one lock, with one journal change.
   */
  const settleAll = (stopped: ReadonlyArray<readonly [Shell, StopReport]>) =>
    eventLock.withPermits(1)(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const events: Array<ShellEvent> = []
      for (const [shell, report] of stopped) {
        const final = yield* finalStatus(shell, report)
        if (Option.isNone(final)) continue
        yield* Ref.set(shell.status, final.value)
        yield* Ref.set(shell.endedAt, now)
        const info = yield* infoOf(shell)
        events.push(final.value._tag === "Killed" && final.value.by !== undefined ? { _tag: "Killed", info, report } : { _tag: "Exited", info })
        yield* Deferred.succeed(shell.settled, undefined)
      }
      yield* publish(...events)
    })).pipe(
      Effect.zipRight(journalChanged)
    )

  const settle = (shell: Shell, report: StopReport) => settleAll([[shell, report]])

  const stop = (shell: Shell) =>
    Effect.flatMap(shell.group.stop(), (report) => Effect.as(settle(shell, report), report))

  /** Counts what still runs after the leader exited; the first count is an event. */
  const linger = (shell: Shell, exit: ExitStatus, members: number) =>
    eventLock.withPermits(1)(Effect.gen(function*() {
      const first = yield* Ref.modify(shell.status, (s): readonly [boolean, ShellStatus] =>
        s._tag === "Running" || s._tag === "Lingering" ? [s._tag === "Running", { _tag: "Lingering", exit, members }] : [false, s]
      )
      if (first) yield* publish({ _tag: "Lingering", info: yield* infoOf(shell) })
    }))

  /** Leader exit, then an empty group: the shell's natural end. */
  const naturalEnd = (shell: Shell) =>
    Effect.gen(function*() {
      const exit = yield* shell.group.awaitExit
      // a stop under way will empty the group: no need to watch it here
      if ((yield* Ref.get(shell.status))._tag === "Stopping") return
      let members = yield* containment.members(shell.group.target)
      while (members > 0) {
        yield* linger(shell, exit, members)
        yield* Effect.sleep(Duration.seconds(1))
        members = yield* containment.members(shell.group.target)
      }
    })

  const lifecycle = (shell: Shell) =>
    Effect.gen(function*() {
      const ended = yield* Effect.race(
        Effect.as(naturalEnd(shell), true),
        Effect.as(Effect.sleep(limits.lifetime), false)
      )
      if (!ended) yield* markStopping(shell, "lifetime")
      // begun, the end runs through: the shutdown interrupts lifecycles and waits for them
      yield* Effect.uninterruptible(Effect.zipRight(stop(shell), Scope.close(shell.scope, Exit.void)))
      const retained = yield* Effect.raceFirst(Effect.as(Effect.sleep(limits.retention), true), Effect.as(Deferred.await(shuttingDown), false))
      if (retained) yield* dropped(shell)
    })

  /** A new shell's id and its slot under the cap, held until the start registered it or failed. */
  const admit = admission.withPermits(1)(Effect.gen(function*() {
    yield* makeRoom
    if ((yield* occupied) >= limits.maxShells) {
      return yield* new TooManyShells({ limit: limits.maxShells, running: yield* Effect.forEach(shells.values(), infoOf) })
    }
    const id = `s${++counter}`
    yield* Ref.update(admitted, HashSet.add(id))
    return id
  }))

  const start = Effect.fn("ShellRegistry.start")(function*(spec: SpawnSpec, startOptions: StartOptions) {
    if (closing) return yield* new RegistryClosed()
    return yield* gate.withPermits(1)(Effect.scoped(Effect.gen(function*() {
      if (closing) return yield* new RegistryClosed()
      const id = yield* Effect.acquireRelease(admit, (id) => Ref.update(admitted, HashSet.remove(id)))
      const tag = `${Journal.keyOf(supervisor)}:${id}`
      const scope = yield* Scope.make()
      const group = yield* ProcessGroup.spawn(withShell(spec, commandShell, tag)).pipe(
        Scope.extend(scope),
        Effect.tapError(() => Scope.close(scope, Exit.void))
      )
      const shell: Shell = {
        id,
        group,
        scope,
        base: {
          id,
          tag,
          pid: group.pid,
          command: typeof spec.command === "string" ? spec.command : spec.command.join(" "),
          cwd: spec.cwd ?? process.cwd(),
          name: startOptions.name,
          owner: startOptions.owner,
          containment: group.containment,
          ...(group.tty ? { tty: true } : {}),
          startedAt: yield* Clock.currentTimeMillis
        },
        status: yield* Ref.make<ShellStatus>({ _tag: "Running" }),
        endedAt: yield* Ref.make<number | undefined>(undefined),
        settled: yield* Deferred.make<void>(),
        cursors: new Map()
      }
      // announced before anyone can find it to kill it
      const info = yield* infoOf(shell)
      yield* publish({ _tag: "Started", info })
      shells.set(id, shell)
      yield* journalChanged
      // forked inside the start's uninterruptible region, a lifecycle would inherit it: the shutdown's interrupt must reach its waits
      yield* FiberMap.run(lifecycles, id, Effect.interruptible(lifecycle(shell)))
      return info
    })))
  }, Effect.provide(spawnContext))

  const owned = (id: string, caller: string) =>
    Effect.flatMap(lookup(id), (shell) =>
      shell.base.owner === caller ? Effect.succeed(shell) : Effect.fail(new NotOwner({ id, owner: shell.base.owner, caller })))

  const write = Effect.fn("ShellRegistry.write")(function*(
    id: string,
    input: { readonly text?: string | undefined; readonly eof?: boolean | undefined },
    writeOptions: { readonly owner: string }
  ) {
    const shell = yield* owned(id, writeOptions.owner)
    if (!(yield* shell.group.writeStdin(input))) return yield* new NoStdin({ id })
  })

  const signal = Effect.fn("ShellRegistry.signal")(function*(id: string, name: NodeJS.Signals, signalOptions: { readonly owner: string }) {
    const shell = yield* owned(id, signalOptions.owner)
    if (!isActive(yield* Ref.get(shell.status))) return
    // the group may have emptied since: nothing left to signal is no failure
    yield* Effect.sync(() => {
      try {
        process.kill(-shell.group.pid, name)
      } catch {}
    })
  })

  const kill = Effect.fn("ShellRegistry.kill")(function*(id: string, killOptions: { readonly owner: string }) {
    const shell = yield* owned(id, killOptions.owner)
    yield* markStopping(shell, "request")
    return yield* stop(shell)
  })

  // Every shell at once, with one process-table scan per tick for all of
  // them, then one settling, one journal removal and one watcher write; then
  // the end of the event streams.
  const closeAll = gate.withPermits(startPermits)(Effect.gen(function*() {
    closing = true
    yield* Deferred.succeed(shuttingDown, undefined)
    yield* journal.stopWriting
    // a lifecycle would scan for its ended group and settle it again: here they are all settled at once
    yield* Fiber.interruptAll(Array.from(lifecycles, ([, fiber]) => fiber))
    const all = [...shells.values()]
    yield* Effect.forEach(all, (shell) => markStopping(shell, "shutdown"), { discard: true })
    const reports = yield* ProcessGroup.stopAll(all.map((s) => s.group))
    yield* settleAll(all.map((shell, i) => [shell, reports[i]!] as const))
    yield* Effect.forEach(all, (s) => Scope.close(s.scope, Exit.void), { discard: true, concurrency: "unbounded" })
    yield* journal.remove
    // set first: a subscriber that finds it set has all there will be in its queue
    eventsEnded = true
    yield* PubSub.publish(takes, Take.end)
  })).pipe(Effect.provide(context))
  // the layer's release, or a consumer's before it: whoever comes second waits for the first
  const shutdown = yield* Effect.cached(Effect.uninterruptible(closeAll))

  yield* Effect.addFinalizer(() => shutdown)

  /** A subscription's events as a stream that ends with the shutdown's end. */
  const subscribeEvents = Effect.map(PubSub.subscribe(takes), (queue) =>
    Stream.flattenTake(
      // subscribed after the end: the queue holds all that will come, which may not include the end itself
      eventsEnded ? Stream.unwrap(Effect.map(Queue.takeAll(queue), Stream.fromIterable)) : Stream.fromQueue(queue)
    ))

  return ShellRegistry.of({
    start,
    output: (id, outputOptions = {}) =>
      Effect.flatMap(lookup(id), (shell) =>
        ShellOutput.read({
          output: shell.group.output,
          cursors: shell.cursors,
          info: infoOf(shell),
          settled: Deferred.await(shell.settled)
        }, outputOptions)),
    kill,
    write,
    signal,
    unread: (id, reader) =>
      Effect.flatMap(lookup(id), (shell) =>
        Effect.map(shell.group.output.readSince(shell.cursors.get(reader) ?? 0), ({ text }) => ShellOutput.lineCount(text))),
    info: (id) => Effect.flatMap(lookup(id), infoOf),
    list: Effect.suspend(() => Effect.forEach(shells.values(), infoOf)),
    follow: (id, followOptions = {}) =>
      Effect.flatMap(lookup(id), ({ group: { output } }) =>
        Effect.map(output.stats, ({ written }) => output.follow(followOptions.retained === true ? 0 : written))),
    events: Stream.unwrapScoped(subscribeEvents),
    subscribe: subscribeEvents,
    subscribeQueue: PubSub.subscribe(hub),
    shutdown,
    guard: (group) =>
      Option.match(watcher, {
        onNone: () => Effect.void,
        onSome: (w) => w.guard(group.target)
      }),
    shell: commandShell,
    get supervisor() {
      return supervisor
    },
    rename: (name) =>
      Effect.suspend(() => {
        supervisor = { ...supervisor, name: supervisorName(name) }
        return journal.writeNow
      }),
    stateDir
  })
})

/** One line of at most 60 characters: a name is shown in a table column. */
const supervisorName = (name: string) => {
  const line = name.replace(/\s+/g, " ").trim()
  return line.length <= 60 ? line : `${line.slice(0, 59)}…`
}

/** A spec as the registry runs it: its shell, the unbuffered environment, its tag. */
export const withShell = (spec: SpawnSpec, shell: CommandShell.CommandShell, shellId: string): SpawnSpec => ({
  ...spec,
  shell: spec.shell ?? shell.path,
  env: CommandShell.environment({ ...process.env, ...spec.env }),
  shellId
})

/**
 * Registries alive in this process. The first is instance 1, tagged and
 * journalled by the bare pid; another alive at the same time gets its own
 * number, so two never share a tag (and take each other's processes for
 * escapers) or a journal file.
 */
const liveInstances = new Set<number>()

const claimInstance = Effect.acquireRelease(
  Effect.sync(() => {
    let n = 1
    while (liveInstances.has(n)) n++
    liveInstances.add(n)
    return n
  }),
  (n) => Effect.sync(() => liveInstances.delete(n))
)

const journalShell = (s: Shell): Journal.JournalShell => ({
  id: s.id,
  tag: s.base.tag,
  pid: s.group.pid,
  leaderStartTime: s.group.leaderStartTime ?? null,
  bornAfter: s.group.target.startTime,
  cgroup: s.group.target.cgroup,
  pidns: s.group.target.pidns,
  command: s.base.command,
  cwd: s.base.cwd,
  owner: s.base.owner,
  name: s.base.name,
  startedAt: s.base.startedAt
})

const supervisorIdentity = (options: RegistryOptions) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const self = yield* table.lookup(process.pid)
    const instance = yield* claimInstance
    return {
      pid: process.pid,
      ...(instance > 1 ? { instance } : {}),
      startTime: Option.match(self, { onNone: () => 0, onSome: (p) => p.startTime }),
      uid: StateDir.ownUid(),
      pidns: yield* Journal.ownNamespace,
      name: supervisorName(options.name ?? process.title),
      startedAt: yield* Clock.currentTimeMillis
    } satisfies Journal.Supervisor
  })
