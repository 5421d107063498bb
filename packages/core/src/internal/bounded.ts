/**
 * A wait with a bound that holds in a finalizer. Scope releases, stops and
 * a registry's shutdown run uninterruptibly, and a timeout cannot cut short
 * an uninterruptible wait: it waits for the effect to end, however long
 * that is. The effect is made interruptible first, so the bound holds
 * wherever it runs. Without that, a cell whose member no signal ends (a
 * process frozen in state D) was waited on forever by its release.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"

/** `effect`'s result, or none once `duration` has passed: the effect is interrupted then. */
export const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, duration: Duration.DurationInput): Effect.Effect<Option.Option<A>, E, R> =>
  Effect.timeoutOption(Effect.interruptible(effect), duration)
