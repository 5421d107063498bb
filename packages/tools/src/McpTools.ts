/**
 * The shell tools on an `@effect/ai` `McpServer`, with results as a model
 * should read them: plain text, `isError` on failures, and the metadata under
 * `_meta["corral/result"]`. `McpServer.toolkit` would send `JSON.stringify`
 * of each result instead, and `structuredContent` is not used because several
 * clients hand it to the model in place of the text.
 */
import * as McpSchema from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as Tool from "@effect/ai/Tool"
import type { ShellInfo } from "@corral/core/ShellRegistry"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Stream from "effect/Stream"
import * as Notices from "./internal/notices.js"
import * as Settings from "./internal/settings.js"
import * as ShellTools from "./ShellTools.js"
import * as ToolDefinition from "./ToolDefinition.js"
import type { ToolError, ToolResult } from "./ToolResult.js"

/** Where a result's metadata goes in `_meta`. */
export const META_KEY = "corral/result"

export const describe = (tool: Tool.Any): McpSchema.Tool => {
  const title = Option.getOrUndefined(Context.getOption(tool.annotations, Tool.Title))
  return new McpSchema.Tool({
    name: tool.name,
    title,
    description: tool.description,
    inputSchema: ToolDefinition.parametersOf(tool),
    annotations: new McpSchema.ToolAnnotations({
      title,
      readOnlyHint: Context.get(tool.annotations, Tool.Readonly),
      destructiveHint: Context.get(tool.annotations, Tool.Destructive),
      idempotentHint: Context.get(tool.annotations, Tool.Idempotent),
      openWorldHint: Context.get(tool.annotations, Tool.OpenWorld)
    })
  })
}

const textResult = (text: string, isError: boolean, meta?: Record<string, unknown>) =>
  new McpSchema.CallToolResult({
    content: [{ type: "text", text }],
    isError,
    ...(meta === undefined ? {} : { _meta: { [META_KEY]: meta } })
  })

const clip = (line: string, max: number) => (line.length <= max ? line : `${line.slice(0, max - 1)}…`)

/** The first line of what went wrong, at most 200 characters: a stack or a dump helps no model. */
const summary = (error: unknown): string => {
  const text = error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error) ?? String(error)
  return clip(text.trim().split("\n", 1)[0]!, 200)
}

const internalError = (name: string, error: unknown) =>
  `internal error in ${name}: ${summary(error)}. Retry; if it persists, it is a bug in corral: report it with corral's stderr.`

/**
 * The handlers check every parameter themselves (see `internal/strict.ts`):
 * what the toolkit still rejects is arguments that are not an object at all.
 */
const explainRejected = (name: string, error: unknown): string => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  return ParseResult.isParseError(cause)
    ? `invalid arguments for ${name}: they must be an object of its parameters, as its input schema says`
    : internalError(name, error)
}

type Built = Effect.Effect.Success<typeof ShellTools.toolkit>

const call = (built: Built, name: ShellTools.Tools[keyof ShellTools.Tools]["name"], payload: unknown) =>
  built.handle(name, (payload ?? {}) as Record<string, unknown>).pipe(
    Effect.map(({ isFailure, result }) =>
      isFailure
        ? textResult((result as ToolError).message, true, { error: (result as ToolError).reason })
        : textResult((result as ToolResult).text, false, (result as ToolResult).metadata)
    ),
    Effect.catchAll((error) => Effect.succeed(textResult(explainRejected(name, error), true))),
    // the whole cause goes to the log (stderr); the model gets one line
    Effect.catchAllDefect((defect) =>
      Effect.as(Effect.logError(`internal error in ${name}`, Cause.die(defect)), textResult(internalError(name, defect), true))
    )
  )

/** Adds the four tools to the server; their handlers come from `ShellTools.layer`. */
export const register = Effect.gen(function*() {
  const server = yield* McpServer.McpServer
  const built = yield* ShellTools.toolkit
  for (const tool of Object.values(built.tools)) {
    yield* server.addTool({ tool: describe(tool), handle: (payload) => call(built, tool.name, payload) })
  }
})

export const layer = Layer.effectDiscard(register)

/**
 * Each end of the owner's shells, also as an MCP `notifications/message`
 * (level `notice`, logger `corral`), for clients that show it or act on it
 * before the next tool call. A stop the owner asked for is not news to it.
 */
export const noticesLayer = (options: { readonly owner: string }) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const server = yield* McpServer.McpServer
    const registry = yield* ShellRegistry
    const events = yield* registry.subscribe
    const reader = Settings.make(options).reader
    const send = (info: ShellInfo) =>
      Effect.gen(function*() {
        const unread = Option.getOrUndefined(yield* Effect.option(registry.unread(info.id, reader)))
        const text = Notices.noticeText(info, yield* Clock.currentTimeMillis, unread)
        yield* server.notifications["notifications/message"]({ level: "notice", logger: "corral", data: { text, shell_id: info.id } })
      })
    yield* Effect.forkScoped(Stream.runForEach(events, (event) =>
      event._tag === "Started" || event._tag === "Dropped" || event.info.owner !== options.owner ||
        (event.info.status._tag === "Killed" && event.info.status.by === "request")
        ? Effect.void
        : send(event.info)))
  }))
