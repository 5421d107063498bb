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
  /** Drops an ended shell at once, not waiting for its lifecycle to wind down: one synchronous step. */
  readonly dropNow: (shell: Shell) => void
}

/**
 * The bookkeeping is plain state changed in synchronous steps, not refs and
 * semaphores: a start is admitted, or refused, in one step that no other
 * fiber can interleave with, making room included (the ended shells it
 * drops are known without reading any shell's state). Semaphores and a
 * `HashSet` ref were most of what a start allocated before its spawn
 * (90 KiB), and on the VMs corral is built on each 4 KiB a start touches
 * after a fork costs a page fault; making room through a semaphore and a
 * read of every shell's status cost a start 0.2-0.5 ms once the registry
 * held `maxShells`.
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

    /** Registered shells and admitted starts, each counted once. */
    const occupied = () => {
      let pending = 0
      for (const id of admitted) if (!shells.byId.has(id)) pending++
      return shells.byId.size + pending
    }

    /** Drops ended shells, oldest first, until one more fits under the cap. */
    const makeRoom = () => {
      const excess = occupied() + 1 - limits.maxShells
      if (excess > 0) shells.oldestEnded(excess).forEach(options.dropNow)
    }

    /** An id and a slot, or undefined where every shell held still runs. */
    const take = (): string | undefined => {
      makeRoom()
      if (occupied() >= limits.maxShells) return undefined
      const id = `s${++counter}`
      admitted.add(id)
      inFlight++
      return id
    }

    /** A start leaves the gate, registered or failed. The shutdown waits for the last. */
    const release = (id: string) =>
      Effect.sync(() => {
        admitted.delete(id)
        if (--inFlight === 0 && closing) Deferred.unsafeDone(drained, Effect.void)
      })

    const admit = Effect.suspend((): Effect.Effect<string, RegistryClosed | TooManyShells> => {
      if (closing) return new RegistryClosed()
      const id = take()
      if (id !== undefined) return Effect.succeed(id)
      return Effect.flatMap(Effect.forEach(shells.byId.values(), infoOf), (running) => new TooManyShells({ limit: limits.maxShells, running }))
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
