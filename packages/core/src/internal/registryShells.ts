/**
 * The registry's shells and their events: the table of registered shells,
 * what each looks like from outside, and the hub that publishes their
 * events so that every subscriber sees each shell's events in order.
 */
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as MutableRef from "effect/MutableRef"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import type * as ProcessGroup from "../ProcessGroup.js"
import type { ShellInfo, ShellStatus } from "../Shell.js"
import type { ShellEvent, ShellRegistry } from "../ShellRegistry.js"

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

/** A registered shell: its group, which it holds and releases, and what changes as it lives. */
export interface Shell {
  readonly id: string
  readonly group: ProcessGroup.ProcessGroup
  /** `group` with its release: run when its lifecycle is over, or with every other shell's at the shutdown. */
  readonly owned: ProcessGroup.OwnedGroup
  readonly base: Omit<ShellInfo, "status" | "endedAt">
  /** When it started, in the clock's monotonic ms (`base.startedAt` is the wall clock's): its lifetime runs from then. */
  readonly startedMonotonic: number
  /** Changed only by the registry's own steps, each synchronous: a settling of many shells is one step, not one per shell. */
  readonly status: MutableRef.MutableRef<ShellStatus>
  readonly endedAt: MutableRef.MutableRef<number | undefined>
  /** Completed once the shell has settled into a final status. */
  readonly settled: Deferred.Deferred<void>
  /** Completed once the shell has left the registry: its lifecycle's retention wait is over. */
  readonly gone: Deferred.Deferred<void>
  /** Each reader's position for `new` reads. */
  readonly cursors: Map<string, number>
}

export const unsafeInfoOf = (shell: Shell): ShellInfo => ({
  ...shell.base,
  status: MutableRef.get(shell.status),
  endedAt: MutableRef.get(shell.endedAt)
})

export const infoOf = (shell: Shell): Effect.Effect<ShellInfo> => Effect.sync(() => unsafeInfoOf(shell))

/** The table, and the registry's `list` and event streams as they are: the streams end with `endEvents`. */
export interface Shells extends Pick<ShellRegistry["Type"], "list" | "events" | "subscribe" | "subscribeQueue"> {
  /** Registered shells by id, oldest first. */
  readonly byId: ReadonlyMap<string, Shell>
  readonly lookup: (id: string) => Effect.Effect<Shell, UnknownShell>
  /** Announces a new shell, then registers it: announced before anyone can find it to kill it. */
  readonly register: (shell: Shell) => Effect.Effect<ShellInfo>
  /** Registered shells whose status passes `keep`. */
  readonly having: (keep: (status: ShellStatus) => boolean) => Effect.Effect<ReadonlyArray<Shell>>
  /**
   * Runs `f` under the event lock: a shell's final status and its event, and
   * a drop and its event, are published together, so every subscriber sees
   * each shell's events in order.
   */
  readonly inOrder: <A, E, R>(f: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly publish: (events: ReadonlyArray<ShellEvent>) => Effect.Effect<void>
  /** Publishes the final events of shells that settled, and counts them ended in the same step. */
  readonly publishEnded: (ended: ReadonlyArray<Shell>, events: ReadonlyArray<ShellEvent>) => Effect.Effect<void>
  /** Up to `count` ended shells, oldest first. */
  readonly oldestEnded: (count: number) => ReadonlyArray<Shell>
  /**
   * Unregisters an ended shell, once, with its event: one synchronous step,
   * outside the event lock, for its final event is out already, and no other
   * of its events can follow.
   */
  readonly unsafeDrop: (shell: Shell) => void
  /** Ends the event streams after the events published so far (the shutdown's last). */
  readonly endEvents: Effect.Effect<void>
}

/**
 * The registry's events. Each goes to two hubs: `hub` for subscribeQueue, a
 * queue drained at will, and `takes` for the streams, which the shutdown
 * ends after its last event (a queue cannot carry an end, a stream of Takes
 * can).
 */
const makeEvents = Effect.gen(function*() {
  const hub = yield* PubSub.unbounded<ShellEvent>()
  const takes = yield* PubSub.unbounded<Take.Take<ShellEvent>>()
  let eventsEnded = false
  // one synchronous step (unbounded hubs never wait): a start publishes its Started event after its spawn,
  // where every step it takes costs page faults
  const publishNow = (events: ReadonlyArray<ShellEvent>) => {
    for (const event of events) hub.unsafeOffer(event)
    takes.unsafeOffer(Take.chunk(Chunk.fromIterable(events)))
  }
  /** A subscription's events as a stream that ends with the shutdown's end. */
  const subscribe = Effect.map(PubSub.subscribe(takes), (queue) =>
    Stream.flattenTake(
      // subscribed after the end: the queue holds all that will come, which may not include the end itself
      eventsEnded ? Stream.unwrap(Effect.map(Queue.takeAll(queue), Stream.fromIterable)) : Stream.fromQueue(queue)
    ))
  const end = Effect.suspend(() => {
    // set first: a subscriber that finds it set has all there will be in its queue
    eventsEnded = true
    return Effect.asVoid(PubSub.publish(takes, Take.end))
  })
  return { publishNow, subscribe, subscribeQueue: PubSub.subscribe(hub), end }
})

/** `retention` is only for the message of an unknown id. */
export const make = (retention: Duration.Duration): Effect.Effect<Shells, never, Scope.Scope> =>
  Effect.gen(function*() {
    const byId = new Map<string, Shell>()
    const { end, publishNow, subscribe, subscribeQueue } = yield* makeEvents
    // settled, their final event published: the shells a drop may take
    const ended = new WeakSet<Shell>()
    const eventLock = yield* Effect.makeSemaphore(1)
    return {
      byId,
      lookup: (id) =>
        Effect.suspend(() => {
          const shell = byId.get(id)
          return shell === undefined ? Effect.fail(new UnknownShell({ id, known: [...byId.keys()], retention })) : Effect.succeed(shell)
        }),
      register: (shell) =>
        Effect.sync(() => {
          const info = unsafeInfoOf(shell)
          publishNow([{ _tag: "Started", info }])
          byId.set(shell.id, shell)
          return info
        }),
      having: (keep) => Effect.sync(() => Array.from(byId.values()).filter((s) => keep(MutableRef.get(s.status)))),
      inOrder: eventLock.withPermits(1),
      publish: (events) => events.length === 0 ? Effect.void : Effect.sync(() => publishNow(events)),
      publishEnded: (settled, events) =>
        Effect.sync(() => {
          publishNow(events)
          for (const shell of settled) ended.add(shell)
        }),
      oldestEnded: (count) => {
        const oldest: Array<Shell> = []
        for (const shell of byId.values()) {
          if (oldest.length >= count) break
          if (ended.has(shell)) oldest.push(shell)
        }
        return oldest
      },
      unsafeDrop: (shell) => {
        if (byId.delete(shell.id)) publishNow([{ _tag: "Dropped", id: shell.id }])
        // its lifecycle then winds down (releases its group, removes its cell) in a macrotask, not in a
        // microtask on the path of the start that made room, before that start's caller has its id
        setImmediate(() => Deferred.unsafeDone(shell.gone, Effect.void))
      },
      endEvents: end,
      list: Effect.sync(() => Array.from(byId.values(), unsafeInfoOf)),
      events: Stream.unwrapScoped(subscribe),
      subscribe,
      subscribeQueue
    }
  })
