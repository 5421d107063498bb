/**
 * Admission of new shells: the gate that the shutdown closes, and each
 * start's id and slot under the shell cap, made room for by dropping
 * finished shells, oldest first.
 */
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type { LimitsShape } from "../Limits.js"
import type { ShellInfo } from "../Shell.js"
import type { Shell, Shells } from "./registryShells.js"
import { isActive } from "../Shell.js"
import { infoOf } from "./registryShells.js"

export class TooManyShells extends Data.TaggedError("TooManyShells")<{ readonly limit: number; readonly running: ReadonlyArray<ShellInfo> }> {
  override get message() {
    const list = this.running.map((s) => `${s.id} (${s.command.slice(0, 60)})`).join(", ")
    return `${this.limit} shells are already running, the limit: ${list}. Stop one you no longer need with kill, then start again.`
  }
}

export class RegistryClosed extends Data.TaggedError("RegistryClosed")<{}> {
  override get message() {
    return "the shell registry is shutting down: no new shell can start"
  }
}

export interface Admission {
  /**
   * Runs a start with a new shell's id, its slot under the cap held until
   * `start` registered the shell or failed.
   */
  readonly admitted: <A, E, R>(start: (id: string) => Effect.Effect<A, E, R>) => Effect.Effect<A, E | TooManyShells | RegistryClosed, R>
  /** Closes the gate, waits for the starts in flight, then runs `shutdown`. */
  readonly close: <A, E, R>(shutdown: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export interface Options {
  readonly limits: LimitsShape
  readonly shells: Shells
  /** Drops a finished shell at once, not waiting for its lifecycle to wind down. */
  readonly dropNow: (shell: Shell) => Effect.Effect<void>
}

/**
 * The bookkeeping is plain state changed in synchronous steps, not refs and
 * semaphores: a start that fits under the cap is admitted in one step,
 * which no other fiber can interleave with. Semaphores and a `HashSet` ref
 * were most of what a start allocated before its spawn (90 KiB), and on the
 * VMs corral is built on each 4 KiB a start touches after a fork costs a
 * page fault.
 */
export const make = (options: Options): Effect.Effect<Admission> =>
  Effect.gen(function*() {
    const { limits, shells } = options
    let counter = 0
    // ids of starts admitted under the cap and not yet registered: they count
    // against it from before their spawn, so concurrent starts cannot all pass
    // the check; the spawns themselves run concurrently
    const admitted = new Set<string>()
    let inFlight = 0
    let closing = false
    // completed once the gate is closed and the last start in flight is done
    const drained = yield* Deferred.make<void>()
    // a start that must make room waits for the one making room before it
    const makingRoom = yield* Effect.makeSemaphore(1)
    let roomWaiters = 0

    /** Registered shells and admitted starts, each counted once. */
    const occupied = () => {
      let pending = 0
      for (const id of admitted) if (!shells.byId.has(id)) pending++
      return shells.byId.size + pending
    }

    /** A start leaves the gate: admitted and done, or refused. The shutdown waits for the last. */
    const leave = () => {
      if (--inFlight === 0 && closing) Deferred.unsafeDone(drained, Effect.void)
    }

    /** An id and a slot now, or why not; undefined when finished shells must be dropped first. */
    const take = (): string | RegistryClosed | undefined => {
      if (closing) return new RegistryClosed()
      if (occupied() >= limits.maxShells) return undefined
      const id = `s${++counter}`
      admitted.add(id)
      return id
    }

    const release = (id: string) =>
      Effect.sync(() => {
        admitted.delete(id)
        leave()
      })

    /** Drops finished shells, oldest first, until one more fits under the cap, then takes the slot. */
    const takeWithRoom = makingRoom.withPermits(1)(Effect.gen(function*() {
      const excess = occupied() + 1 - limits.maxShells
      if (excess > 0) {
        const finished = yield* shells.having((status) => !isActive(status))
        yield* Effect.forEach(finished.slice(0, excess), options.dropNow, { discard: true })
      }
      const taken = take()
      if (taken !== undefined) return yield* (typeof taken === "string" ? Effect.succeed(taken) : taken)
      return yield* new TooManyShells({ limit: limits.maxShells, running: yield* Effect.forEach(shells.byId.values(), infoOf) })
    })).pipe(
      Effect.ensuring(Effect.sync(() => roomWaiters--)),
      Effect.onError(() => Effect.sync(leave))
    )

    /** Run uninterruptibly, as `acquireUseRelease`'s acquire: every start that enters leaves. */
    const admit = Effect.suspend(() => {
      if (closing) return new RegistryClosed()
      inFlight++
      // while a start makes room, later ones queue behind it, as they would for the slot it makes
      const taken = roomWaiters === 0 ? take() : undefined
      if (taken === undefined) {
        roomWaiters++
        return takeWithRoom
      }
      return typeof taken === "string" ? Effect.succeed(taken) : Effect.zipRight(Effect.sync(leave), taken)
    })

    return {
      admitted: (start) => Effect.acquireUseRelease(admit, start, release),
      close: (shutdown) =>
        Effect.suspend(() => {
          closing = true
          return inFlight === 0 ? shutdown : Effect.zipRight(Deferred.await(drained), shutdown)
        })
    }
  })
