// The registry's cap: 16 running shells, a refused 17th, and room again once one is stopped.
import { Limits, ShellRegistry } from "@corral/core"
import * as Effect from "effect/Effect"
import { check, failure, killConfirmed, start, withRegistry } from "../lib/harness.mjs"

const CAP = 16

export default {
  id: "shell-cap",
  summary: `${CAP} shells at the cap, a 17th refused with TooManyShells`,
  orphans: false,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const { maxShells } = yield* Limits
      yield* check(maxShells === CAP, `the default cap is ${maxShells}, not ${CAP}`)
      ctx.phase = "starting 16"
      const shells = yield* Effect.forEach(Array.from({ length: CAP }), () => start(["sleep", "60"]), { concurrency: 4 })
      ctx.phase = "17th"
      const refused = yield* Effect.flip(start(["sleep", "60"])).pipe(
        Effect.catchAll(() => failure(`a ${CAP + 1}th shell was started past the cap`))
      )
      yield* check(
        refused._tag === "TooManyShells" && refused.limit === CAP && refused.running.length === CAP,
        `the ${CAP + 1}th start failed with ${refused._tag} (${refused.message}), expected TooManyShells listing ${CAP} shells`
      )
      ctx.phase = "kill"
      yield* killConfirmed(shells[0])
      ctx.phase = "start after kill"
      yield* start(["sleep", "60"])
      ctx.phase = "list"
      const running = (yield* registry.list).filter((s) => s.status._tag === "Running")
      yield* check(running.length === CAP, `${running.length} running after stopping one and starting one, expected ${CAP}`)
      ctx.phase = "releasing"
    }))
}
