/**
 * corral's stdout as an effect, for output that may be long (`corral logs`,
 * MCP messages), and the short writes of `print.ts`.
 */
import * as Effect from "effect/Effect"
import { stdout } from "./print.js"

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
