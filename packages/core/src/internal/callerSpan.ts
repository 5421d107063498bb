/**
 * Spans for the registry's hot calls, made only where the caller is traced.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/**
 * `self` in a span named `name` where its caller runs inside a span (as
 * every tool handler does, and any traced code), so the span shows in the
 * caller's trace; a bare call goes without one. A span is most of Effect's
 * tracing code, and after the supervisor idled for 50 ms that code is cold:
 * a root span cost a `ShellRegistry.start` 0.2 ms of its 3.2 (the call's
 * first step came at 0.44 ms, 0.22 without it), a child of the caller's
 * span, whose code has just run, about a third of that. See ADR 59.
 */
export const underCallerSpan = (name: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(Tracer.ParentSpan), (parent) => Option.isSome(parent) ? Effect.withSpan(self, name) : self)
