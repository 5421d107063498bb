/**
 * A group's releases, run as one finalizer of its scope, each synchronously
 * where it can. A scope runs every finalizer as an effect of its own, and a
 * release built of effects costs their steps even when there is nothing to
 * wait for, on code a supervisor runs once per shell at its shutdown, mostly
 * unoptimized: 200 scopes of six releases each (see ADR 45).
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"

/** Done when it returns nothing; else the effect still to run. */
export type Release = () => Effect.Effect<void> | void

export interface Releases {
  /** Runs `release` when the scope closes: the last added first, as a scope runs its finalizers. */
  readonly add: (release: Release) => void
}

/** Releases run when the current scope closes, where the finalizer added now would run. */
export const make: Effect.Effect<Releases, never, Scope.Scope> = Effect.flatMap(Effect.scope, (scope) => {
  const added: Array<Release> = []
  return Effect.as(
    Scope.addFinalizerExit(scope, () => runFrom(added, added.length - 1)),
    { add: (release) => void added.push(release) }
  )
})

/** `added[from]` down to `added[0]`; one that throws or dies does not keep the others from running. */
const runFrom = (added: ReadonlyArray<Release>, from: number): Effect.Effect<void> => {
  for (let i = from; i >= 0; i--) {
    let rest: Effect.Effect<void> | void
    try {
      rest = added[i]!()
    } catch (defect) {
      rest = Effect.die(defect)
    }
    if (rest !== undefined) return Effect.ensuring(rest, Effect.suspend(() => runFrom(added, i - 1)))
  }
  return Effect.void
}
