/**
 * Admission of new shells: the gate that the shutdown closes, and each
 * start's id and slot under the shell cap, made room for by dropping
 * finished shells, oldest first.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as HashSet from "effect/HashSet"
import * as Ref from "effect/Ref"
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

export const make = (options: Options): Effect.Effect<Admission> =>
  Effect.gen(function*() {
    const { limits } = options
    // starts hold one permit; shutdown takes them all, so it waits for starts in flight
    const startPermits = limits.maxShells * 4
    const gate = yield* Effect.makeSemaphore(startPermits)
    let closing = false
    const slots = yield* makeSlots(options)
    return {
      admitted: (start) => {
        const refused = Effect.suspend(() => (closing ? new RegistryClosed() : Effect.void))
        return Effect.zipRight(refused, gate.withPermits(1)(Effect.zipRight(refused, Effect.acquireUseRelease(slots.admit, start, slots.release))))
      },
      close: (shutdown) => gate.withPermits(startPermits)(Effect.zipRight(Effect.sync(() => (closing = true)), shutdown))
    }
  })

/** Ids, and slots under the cap: `admit` one at a time, `release` once the start registered its shell or failed. */
const makeSlots = ({ dropNow, limits, shells }: Options) =>
  Effect.gen(function*() {
    let counter = 0
    // ids of starts admitted under the cap and not yet registered: they count
    // against it from before their spawn, so concurrent starts cannot all pass
    // the check; admission is one at a time, the spawns are not
    const admitted = yield* Ref.make(HashSet.empty<string>())
    const admission = yield* Effect.makeSemaphore(1)

    /** Registered shells and admitted starts, each counted once. */
    const occupied = Effect.map(Ref.get(admitted), (ids) => shells.byId.size + HashSet.size(HashSet.filter(ids, (id) => !shells.byId.has(id))))

    /** Drops finished shells, oldest first, until one more fits under the cap; looks at none while one more fits. */
    const makeRoom = Effect.gen(function*() {
      const excess = (yield* occupied) + 1 - limits.maxShells
      if (excess <= 0) return
      const finished = yield* shells.having((status) => !isActive(status))
      yield* Effect.forEach(finished.slice(0, excess), dropNow, { discard: true })
    })

    const admit = admission.withPermits(1)(Effect.gen(function*() {
      yield* makeRoom
      if ((yield* occupied) >= limits.maxShells) {
        return yield* new TooManyShells({ limit: limits.maxShells, running: yield* Effect.forEach(shells.byId.values(), infoOf) })
      }
      const id = `s${++counter}`
      yield* Ref.update(admitted, HashSet.add(id))
      return id
    }))

    return { admit, release: (id: string) => Ref.update(admitted, HashSet.remove(id)) }
  })
