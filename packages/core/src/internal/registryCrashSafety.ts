/**
 * What stops a registry's shells when its supervisor dies without its
 * shutdown: the watcher process, and the journal (with the supervisor's
 * identity it records) that a later corral reads. Set up from the options.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { Containment } from "../Containment.js"
import * as Journal from "../Journal.js"
import type { Limits } from "../Limits.js"
import type * as ProcessGroup from "../ProcessGroup.js"
import { ProcessTable } from "../ProcessTable.js"
import type { RegistryOptions } from "../ShellRegistry.js"
import * as StateDir from "../StateDir.js"
import * as Watcher from "../Watcher.js"
import * as RegistryJournal from "./registryJournal.js"
import type { Shell, Shells } from "./registryShells.js"
import { isActive } from "../Shell.js"

export interface CrashSafety {
  readonly stateDir: string
  readonly journal: RegistryJournal.RegistryJournal
  /** This supervisor as its journal records it now. */
  readonly supervisor: () => Journal.Supervisor
  /** Names the supervisor, and rewrites the journal at once. */
  readonly rename: (name: string) => Effect.Effect<void>
  /** What a spawn needs: with crash safety, the watcher its groups announce themselves to. */
  readonly spawnContext: Context.Context<ProcessTable | Limits | Containment>
  readonly guard: (group: ProcessGroup.ProcessGroup) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Groups whose stop left nothing running: withdrawn from the watcher now
   * (their scopes' closes would), which then ends at once if it watches
   * nothing else, so that its exit overlaps the rest of a shutdown.
   */
  readonly emptied: (groups: ReadonlyArray<ProcessGroup.ProcessGroup>) => Effect.Effect<void>
}

export const make = (options: RegistryOptions, shells: Shells) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<ProcessTable | Limits | Containment>()
    let supervisor = yield* supervisorIdentity(options)
    const stateDir = options.stateDir ?? (yield* StateDir.resolve)
    const crashSafe = options.crashSafety !== false
    const journalled = crashSafe && options.journal !== false
    if (journalled) {
      yield* StateDir.ensure(stateDir)
      yield* StateDir.ensure(Journal.directory(stateDir))
      yield* Journal.reapDead(stateDir)
    }
    const containment = yield* Containment
    if (crashSafe) yield* containment.reapLeftovers
    const watcher = crashSafe ? Option.some(yield* Watcher.make) : Option.none()
    // told once of where every cgroup cell is made: a start need not wake the watcher before its spawn
    if (Option.isSome(watcher) && containment.cells !== undefined) yield* watcher.value.watchCells(containment.cells)
    const journal = journalled
      ? yield* RegistryJournal.make({
        stateDir,
        supervisor: () => supervisor,
        // the shutdown removes the journal once it is done, not once per shell
        live: Effect.flatMap(shells.having(isActive), (live) => Effect.forEach(live, journalShell))
      })
      : RegistryJournal.disabled
    return {
      stateDir,
      journal,
      supervisor: () => supervisor,
      rename: (name) =>
        Effect.suspend(() => {
          supervisor = { ...supervisor, name: supervisorName(name) }
          return journal.writeNow
        }),
      // spawns announce themselves to the watcher (see ProcessGroup.spawn)
      spawnContext: Option.match(watcher, {
        onNone: () => context,
        onSome: (w) => Context.add(context, Watcher.Watcher, w)
      }),
      guard: (group) => Option.match(watcher, { onNone: () => Effect.void, onSome: (w) => w.guard(group.target) }),
      emptied: (groups) =>
        Option.match(watcher, {
          onNone: () => Effect.void,
          // one step for all, as the shutdown marks its shells stopping: not an effect per group
          onSome: (w) => Effect.zipRight(Effect.sync(() => groups.forEach((g) => w.unsafeRemove(Watcher.keyOf(g.target)))), w.endIfIdle)
        })
    } satisfies CrashSafety
  })

/** One line of at most 60 characters: a name is shown in a table column. */
const supervisorName = (name: string) => {
  const line = name.replace(/\s+/g, " ").trim()
  return line.length <= 60 ? line : `${line.slice(0, 59)}…`
}

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

const journalShell = (s: Shell): Effect.Effect<Journal.JournalShell> =>
  Effect.map(s.group.leaderStartTime, (leaderStartTime) => ({
    id: s.id,
    tag: s.base.tag,
    pid: s.group.pid,
    leaderStartTime: leaderStartTime ?? null,
    bornAfter: s.group.target.startTime,
    cgroup: s.group.target.cgroup,
    pidns: s.group.target.pidns,
    reaper: s.group.target.reaper,
    command: s.base.command,
    cwd: s.base.cwd,
    owner: s.base.owner,
    name: s.base.name,
    startedAt: s.base.startedAt
  }))

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
