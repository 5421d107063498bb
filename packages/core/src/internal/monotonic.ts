/**
 * The time deadlines are measured in: milliseconds of the Clock's monotonic
 * reading (its nanoseconds), never its wall time. A wall clock stepped back
 * an hour (NTP, `date -s`, a VM resumed) held a stop in its grace for that
 * hour, and one stepped forward cut the grace short. Effect's timers are
 * monotonic too, and `TestClock` moves both readings together.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

const NANOS_PER_MILLI = BigInt(1_000_000)

export const unsafeMillis = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos() / NANOS_PER_MILLI)

export const millis: Effect.Effect<number> = Effect.clockWith((clock) => Effect.sync(() => unsafeMillis(clock)))
