/**
 * Turns termination signals into a value: while the scope is open they no
 * longer kill corral, so its finalizers (the group stop) always run.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"

export type TerminationSignal = "SIGINT" | "SIGTERM" | "SIGHUP"

export const terminationSignals: ReadonlyArray<TerminationSignal> = ["SIGINT", "SIGTERM", "SIGHUP"]

/** Listens for the scope's lifetime; the returned effect waits for the first signal received. */
export const listen = Effect.fn("Signals.listen")(function*(signals: ReadonlyArray<TerminationSignal>) {
  const received = yield* Deferred.make<TerminationSignal>()
  const onSignal = (signal: TerminationSignal) => Deferred.unsafeDone(received, Effect.succeed(signal))
  yield* Effect.acquireRelease(
    Effect.sync(() => signals.forEach((signal) => process.on(signal, onSignal))),
    () => Effect.sync(() => signals.forEach((signal) => process.off(signal, onSignal)))
  )
  return Deferred.await(received)
})
