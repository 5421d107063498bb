/**
 * A registry's journal writer: one fiber rewrites the journal after changes,
 * off the callers' path, so a burst of starts or ends is one write; the
 * shutdown stops it and removes the journal once. See ADR 0018 for what a
 * crash before a write means.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Journal from "../Journal.js"
import { nextMacrotask } from "./macrotask.js"

export interface RegistryJournal {
  /** Marks the journal out of date: the writer rewrites it shortly. */
  readonly changed: Effect.Effect<void>
  /** `changed`, from outside a fiber (a start's follow-up in its next macrotask). */
  readonly unsafeChanged: () => void
  /** Rewrites it now, for a caller that must know it is written. */
  readonly writeNow: Effect.Effect<void>
  /** Stops writing: the shutdown's changes are not worth a write each. */
  readonly stopWriting: Effect.Effect<void>
  /** Stops writing and deletes the journal (and the socket beside it). */
  readonly remove: Effect.Effect<void>
}

export interface Options {
  readonly stateDir: string
  /** The supervisor as it is now: its name can change. */
  readonly supervisor: () => Journal.Supervisor
  /** The live shells to record. */
  readonly live: Effect.Effect<ReadonlyArray<Journal.JournalShell>>
}

/** A journal that is never written, for a registry without one. */
export const disabled: RegistryJournal = { changed: Effect.void, unsafeChanged: () => {}, writeNow: Effect.void, stopWriting: Effect.void, remove: Effect.void }

export const make = (options: Options): Effect.Effect<RegistryJournal, never, Scope.Scope> =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    let removed = false
    // a journal that cannot be written is said once, not at every change, until it can again
    let failing = false
    const writeNow = lock.withPermits(1)(Effect.gen(function*() {
      if (removed) return
      const shells = yield* options.live
      const written = yield* Effect.either(
        Journal.write(options.stateDir, { version: Journal.version, supervisor: options.supervisor(), shells })
      )
      if (written._tag === "Left" && !failing) {
        yield* Effect.logWarning(`${written.left.message}; if corral and its watcher are both killed, these shells keep running`)
      }
      failing = written._tag === "Left"
    }))
    const dirty = yield* Queue.sliding<void>(1)
    const writer = yield* Effect.forkScoped(
      // after the macrotask of the start that marked it: the write (a rename, which on ext4 flushes the file) is not on its path
      Effect.forever(Queue.take(dirty).pipe(Effect.zipRight(nextMacrotask), Effect.zipRight(writeNow)))
    )
    const stopWriting = Effect.zipRight(Fiber.interrupt(writer), lock.withPermits(1)(Effect.sync(() => (removed = true))))
    return {
      changed: Effect.asVoid(Queue.offer(dirty, undefined)),
      unsafeChanged: () => void Queue.unsafeOffer(dirty, undefined),
      writeNow,
      stopWriting,
      remove: Effect.zipRight(stopWriting, Journal.remove(options.stateDir, Journal.nameOf(options.supervisor())))
    }
  })
