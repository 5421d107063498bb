/**
 * Background shells as Agent Client Protocol tool-call rows, so an editor
 * shows them next to the agent's other tool calls: one row per shell, id
 * `shell:<id>`, title the command, kind `execute`, output streaming into it.
 *
 * Status: `in_progress` while the shell runs (a lingering group counts as
 * running); `completed` when it exited with code 0; `failed` for any other
 * exit code, a failed start, a signal from outside corral, or a stop forced
 * by the lifetime limit. A stop someone asked for (kill_bash, or the host
 * shutting down) maps to `completed`: ending a dev server on request is its
 * normal end, not an error. The row's text says how it ended either way.
 *
 * ACP's `tool_call_update` replaces the row's content, so each update carries
 * the whole text kept for the row (its last `maxChars` characters). The
 * output is flushed into the row before the update with the final status.
 *
 * The rows of the registry's shutdown (every running shell `completed`,
 * "stopped at shutdown") come through ordinary composition:
 * `AcpShellRows.layer(send)` provided with the registry's layer sends them as
 * it is released, before the registry is.
 */
import { randomUUID } from "node:crypto"
import type { ShellEvent, ShellInfo, ShellStatus } from "@corral/core/ShellRegistry"
import { isActive, ShellRegistry } from "@corral/core/ShellRegistry"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Format from "./internal/format.js"
import { screenText } from "./ScreenText.js"

export type ToolCallStatus = "pending" | "in_progress" | "completed" | "failed"

// The shapes are the Agent Client Protocol SDK's (test/AcpShellRows.sdk.test.ts
// checks them against @agentclientprotocol/sdk): its arrays are mutable, so
// ours are too, or a row would not be assignable to the SDK's SessionUpdate.

export interface ToolCallContent {
  readonly type: "content"
  readonly content: { readonly type: "text"; readonly text: string }
}

export interface ToolCall {
  readonly sessionUpdate: "tool_call"
  readonly toolCallId: string
  readonly title: string
  readonly kind: "execute"
  readonly status: ToolCallStatus
  readonly content: Array<ToolCallContent>
  readonly rawInput: { readonly command: string; readonly cwd: string }
}

export interface ToolCallUpdate {
  readonly sessionUpdate: "tool_call_update"
  readonly toolCallId: string
  readonly status?: ToolCallStatus
  /** Replaces the row's content. */
  readonly content?: Array<ToolCallContent>
  readonly rawOutput?: { readonly status: string; readonly exitCode?: number; readonly signal?: string }
}

export type SessionUpdate = ToolCall | ToolCallUpdate

export const toolCallId = (shellId: string) => `shell:${shellId}`

export const statusOf = (status: ShellStatus): ToolCallStatus => {
  switch (status._tag) {
    case "Running":
    case "Lingering":
    case "Stopping":
      return "in_progress"
    case "Exited":
      return status.code === 0 ? "completed" : "failed"
    case "Killed":
      return status.by === "request" || status.by === "shutdown" ? "completed" : "failed"
  }
}

const textContent = (text: string): Array<ToolCallContent> =>
  text === "" ? [] : [{ type: "content", content: { type: "text", text } }]

export const started = (info: ShellInfo, output = ""): ToolCall => ({
  sessionUpdate: "tool_call",
  toolCallId: toolCallId(info.id),
  title: info.command,
  kind: "execute",
  status: statusOf(info.status),
  content: textContent(output),
  rawInput: { command: info.command, cwd: info.cwd }
})

export const outputUpdate = (shellId: string, output: string): ToolCallUpdate => ({
  sessionUpdate: "tool_call_update",
  toolCallId: toolCallId(shellId),
  content: textContent(output)
})

/** The row's last update: its final status, and the output followed by how the shell ended. */
export const ended = (info: ShellInfo, output: string): ToolCallUpdate => {
  const status = info.status
  const end = `[${Format.statusText(status)}]`
  return {
    sessionUpdate: "tool_call_update",
    toolCallId: toolCallId(info.id),
    status: statusOf(status),
    content: textContent(output === "" ? end : `${output.replace(/\n?$/, "\n")}${end}`),
    rawOutput: {
      status: Format.statusText(status),
      ...(status._tag === "Exited" ? { exitCode: status.code } : {}),
      ...(status._tag === "Killed" ? { signal: status.signal } : {})
    }
  }
}

export interface StreamOptions {
  /** Output updates per row come at most this often. Default 100 ms. */
  readonly interval?: Duration.DurationInput | undefined
  /** Characters of output a row keeps, its last ones. Default 30000. */
  readonly maxChars?: number | undefined
}

const keepLast = (text: string, max: number) =>
  text.length <= max ? text : `[... earlier output cut ...]\n${text.slice(text.length - max)}`

/** One subscription's rows: the text each open row keeps, the updates for them, and a follower per open row. */
interface Rows {
  readonly registry: ShellRegistry["Type"]
  readonly interval: Duration.DurationInput
  readonly maxChars: number
  readonly reader: string
  readonly updates: Mailbox.Mailbox<SessionUpdate>
  readonly followers: FiberMap.FiberMap<string>
  readonly texts: Map<string, string>
}

const flush = (rows: Rows, id: string) =>
  Effect.gen(function*() {
    const fresh = yield* Effect.option(rows.registry.output(id, { reader: rows.reader }))
    if (Option.isNone(fresh) || fresh.value.text === "" || !rows.texts.has(id)) return
    // the row as a screen shows it: a progress bar's redraws replace each other, across reads too
    const text = keepLast(screenText(rows.texts.get(id)! + fresh.value.text, fresh.value.info.tty), rows.maxChars)
    rows.texts.set(id, text)
    yield* rows.updates.offer(outputUpdate(id, text))
  })

const follow = (rows: Rows, id: string) =>
  Effect.scoped(Effect.gen(function*() {
    const live = yield* rows.registry.follow(id)
    yield* flush(rows, id)
    yield* Stream.runForEach(Stream.groupedWithin(live, 4096, rows.interval), () => flush(rows, id))
  })).pipe(Effect.ignore)

const open = (rows: Rows, info: ShellInfo) =>
  Effect.gen(function*() {
    if (rows.texts.has(info.id)) return
    rows.texts.set(info.id, "")
    yield* rows.updates.offer(started(info))
    yield* FiberMap.run(rows.followers, info.id, follow(rows, info.id))
  })

const close = (rows: Rows, info: ShellInfo) =>
  Effect.gen(function*() {
    yield* open(rows, info)
    const follower = yield* Effect.option(FiberMap.get(rows.followers, info.id))
    // the output has ended by the time a shell settles: the follower finishes its last read
    if (Option.isSome(follower)) yield* Fiber.await(follower.value)
    yield* flush(rows, info.id)
    yield* rows.updates.offer(ended(info, rows.texts.get(info.id)!))
    rows.texts.delete(info.id)
  })

const onEvent = (rows: Rows, event: ShellEvent) => {
  switch (event._tag) {
    case "Started":
      return open(rows, event.info)
    case "Exited":
    case "Killed":
      return close(rows, event.info)
    case "Lingering":
    case "Dropped":
      return Effect.void
  }
}

/** Subscribes now: the rows of the shells running now, then of each event from here on, for the scope's lifetime. */
const subscribe = (options: StreamOptions) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const interval = options.interval ?? Duration.millis(100)
    const maxChars = options.maxChars ?? 30_000
    const reader = `acp:${randomUUID()}`
    const events = yield* registry.subscribe
    const updates = yield* Mailbox.make<SessionUpdate>()
    const followers = yield* FiberMap.make<string>()
    const rows: Rows = { registry, interval, maxChars, reader, updates, followers, texts: new Map() }

    for (const info of yield* registry.list) {
      if (isActive(info.status)) yield* open(rows, info)
    }
    // the registry's event stream ends after the shutdown's events: every row has had its end by then
    yield* Effect.forkScoped(Effect.zipRight(Stream.runForEach(events, (event) => onEvent(rows, event)), updates.end))
    return Mailbox.toStream(updates)
  })

/**
 * The session updates for every shell of the registry: shells running when
 * the stream starts, then each new one. Output is read with a cursor of the
 * stream's own, so it takes nothing away from the agent's `bash_output`.
 * The stream ends after the rows of the registry's shutdown; to see those,
 * its consumer must outlive the shutdown, as `layer` does.
 */
export const stream = (options: StreamOptions = {}): Stream.Stream<SessionUpdate, never, ShellRegistry> =>
  Stream.unwrapScoped(subscribe(options))

/**
 * Sends every row to `send` (an ACP connection's `sessionUpdate`) for as long
 * as the layer lasts. Provided with the registry's layer, it is released
 * first: it shuts the registry down, sends the rows that shutdown ends, then
 * stops. So an editor sees every shell end, also those the host's exit
 * stopped, with no wiring beyond
 * `AcpShellRows.layer(send).pipe(Layer.provide(registryLayer))`. Its rows
 * start with the shells running when it is built. Its release shuts the
 * registry down even where the registry's own layer lives on.
 */
export const layer = (
  send: (update: SessionUpdate) => Effect.Effect<void>,
  options: StreamOptions = {}
): Layer.Layer<never, never, ShellRegistry> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const registry = yield* ShellRegistry
    // subscribed before the layer is built: no shell the app starts next is missed
    const updates = yield* subscribe(options)
    const rows = yield* Effect.forkScoped(Stream.runForEach(updates, send))
    // finalizers run last added first: this one, before the fork's interruption
    yield* Effect.addFinalizer(() => Effect.zipRight(registry.shutdown, Fiber.await(rows)))
  }))
