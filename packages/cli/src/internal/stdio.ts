/**
 * corral's stdout as an effect, for output that may be long (`corral logs`,
 * MCP messages), and the short writes of `print.ts`.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import { exhaustion, printError, stdout } from "./print.js"

export { printError, writeOut } from "./print.js"

/**
 * Writes to stdout and waits until the reader has taken it (backpressure), so
 * a stalled reader holds corral rather than corral's memory growing. False once
 * the reader is gone: there is no point in writing more.
 */
export const write = (data: string | Uint8Array): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const stream = stdout()
    if (stream.destroyed) return resume(Effect.succeed(false))
    stream.write(data, (error) => resume(Effect.succeed(error == null)))
  })

/**
 * The last word of a command that failed in a way none of its own errors
 * names: the host's limits where one ran out (a low `ulimit -n`), else an
 * internal error, with its cause for the report.
 */
export const printFailure = (cause: Cause.Cause<unknown>): void => {
  const ranOut = [...Cause.defects(cause), ...Cause.failures(cause)].map(exhaustion).find((m) => m !== undefined)
  printError(ranOut !== undefined ? `cannot go on: ${ranOut}` : `internal error: ${Cause.pretty(cause)}`)
}
