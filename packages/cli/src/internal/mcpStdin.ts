/**
 * MCP makes `arguments` of a `tools/call` optional, and `@effect/ai` 0.37
 * rejects a call without it before any tool sees it. Filling in `{}` lets a
 * client call `list_shells` with no arguments at all.
 */
import * as Stream from "effect/Stream"

const withArguments = (line: string): string => {
  if (!line.includes("tools/call")) return line
  try {
    const message = JSON.parse(line)
    if (message?.method !== "tools/call" || typeof message.params !== "object" || message.params === null) return line
    if (message.params.arguments !== undefined) return line
    return JSON.stringify({ ...message, params: { ...message.params, arguments: {} } })
  } catch {
    return line
  }
}

export const fillToolArguments = <E, R>(stdin: Stream.Stream<Uint8Array, E, R>): Stream.Stream<Uint8Array, E, R> =>
  stdin.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.map((line) => `${withArguments(line)}\n`),
    Stream.encodeText
  )
