/**
 * A guard for each line between corral's stdio and the `@effect/ai` 0.37 MCP
 * server. The server reads stdin with `@effect/rpc`'s ndjson JSON-RPC parser.
 * That parser throws on a blank line, on a line that is not JSON, on `null`,
 * and on an id that is a string or a fraction (every id becomes a BigInt).
 * One throw ends its reading, so one bad line silences the server for good.
 * Its error responses carry a JSON dump of the whole Effect `Cause`, which is
 * kilobytes for a cancelled call. It answers an unknown method with the id
 * -32603, where the caller's id should be.
 *
 * So each line that comes in is checked here. What the server would choke on
 * is answered here or dropped. Request ids are swapped for small integers the
 * server accepts. On the way out, each response gets the caller's id back, and
 * each error becomes one short message. Responses to requests the client
 * cancelled are dropped, as the MCP specification asks.
 */
import * as McpSchema from "@effect/ai/McpSchema"
import * as UntrustedJson from "@corral/core/UntrustedJson"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Sink from "effect/Sink"
import * as Stream from "effect/Stream"

/**
 * Longest line accepted, in characters. A 1 MB command fits. The parser's own
 * limit is 16 MiB, and a longer line would throw like any other bad line.
 */
export const MAX_LINE_CHARS = 4 * 1024 * 1024

/** Deepest nesting of arrays and objects accepted in a message: MCP's own messages nest a few levels. */
export const MAX_DEPTH = 64

type Id = string | number

interface Pending {
  readonly id: Id
  readonly method: string
  cancelled: boolean
  /** The answer the client has already (mcpEarlyInitialize.ts): the server's is not sent again. */
  readonly answered?: string | undefined
}

/** A line of stdin, or the length of one too long to keep. */
type Piece = { readonly _tag: "Line"; readonly text: string } | { readonly _tag: "TooLong"; readonly chars: number }

/** What one line of stdin becomes: lines for the server, and answers that go straight back. */
export interface Screened {
  readonly forward: ReadonlyArray<string>
  readonly replies: ReadonlyArray<string>
}

const requestMethods: ReadonlySet<string> = new Set(McpSchema.ClientRequestRpcs.requests.keys())
const notificationMethods: ReadonlySet<string> = new Set(McpSchema.ClientNotificationRpcs.requests.keys())

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** JSON-RPC allows fractional ids; MCP asks for strings and integers; null would mean "no id". */
const isId = (value: unknown): value is Id => typeof value === "string" || (typeof value === "number" && Number.isFinite(value))

/** One line, at most `max` characters, for an error a model or a person reads. */
export const clip = (text: string, max = 200): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

const quote = (value: unknown) => clip(JSON.stringify(value) ?? String(value), 60)

const typeOf = (value: unknown) => (value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`)

const errorLine = (id: Id | null, code: number, message: string) =>
  JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n"

const listed = (names: ReadonlyArray<string>) =>
  names.length <= 1 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`

/**
 * Splits text into lines of at most `maxChars`. A longer line is not kept:
 * it is skipped up to its end and reported by its length.
 */
const boundedLines = (maxChars: number) => <E, R>(text: Stream.Stream<string, E, R>): Stream.Stream<Piece, E, R> =>
  Stream.suspend(() => {
    let pending = ""
    let skipped = 0
    return Stream.mapConcat(text, (chunk) => {
      const pieces: Array<Piece> = []
      let start = 0
      for (let nl = chunk.indexOf("\n"); nl !== -1; nl = chunk.indexOf("\n", start)) {
        const part = chunk.slice(start, nl)
        start = nl + 1
        const line = pending + part
        pending = ""
        if (skipped > 0 || line.length > maxChars) pieces.push({ _tag: "TooLong", chars: skipped + line.length })
        else pieces.push({ _tag: "Line", text: line })
        skipped = 0
      }
      const rest = chunk.slice(start)
      if (skipped > 0) skipped += rest.length
      else if (pending.length + rest.length > maxChars) {
        skipped = pending.length + rest.length
        pending = ""
      } else pending += rest
      return pieces
    })
  })

export interface Options {
  /** The tools the server has, to answer a call of any other at once. */
  readonly tools: ReadonlyArray<string>
  /** Told the client's `clientInfo.name` when it initializes. */
  readonly onClientName?: ((name: string) => void) | undefined
  /** Told when the answer to `initialize` goes out, or (when it went out early) when the server gives its own. */
  readonly onInitialized?: (() => void) | undefined
  /**
   * The answer to the first `initialize` that the dispatcher sent before the
   * server was loaded (mcpEarlyInitialize.ts), with its newline: the server's
   * own answer to that request is dropped.
   */
  readonly answered?: string | undefined
  /** Told the server's own answer when it is not the one sent early (a bug: the client got another). */
  readonly onAnsweredDiffers?: ((early: string, server: string) => void) | undefined
}

/** What one session keeps from line to line: the way in lends the server ids, the way out gives the callers' back. */
interface Session {
  readonly options: Options
  readonly tools: ReadonlySet<string>
  /** The tools named in a sentence, for the errors that list them. */
  readonly toolList: string
  /** The requests the server has, by the id it knows them by. */
  readonly pending: Map<number, Pending>
  /** The same, by the caller's id (as `keyOf` gives it), to cancel one. */
  readonly inFlight: Map<string, number>
  nextId: number
  /** The early answer to `initialize`, until the request it answers is lent an id. */
  answered: string | undefined
}

/** One session's guard: the ids in flight are shared by the way in and the way out. */
export const make = (options: Options) => {
  const session: Session = {
    options,
    tools: new Set(options.tools),
    toolList: listed(options.tools),
    pending: new Map(),
    inFlight: new Map(),
    nextId: 1,
    answered: options.answered
  }
  return {
    screen: (line: string): Screened => screen(session, line),
    restore: (data: string): string => restore(session, data),
    input: input(session),
    output: output(session)
  }
}

// The ids in flight: lent on the way in, settled on the way out.

/** A caller's id as a map key: the string "1" and the number 1 are two ids. */
const keyOf = (id: Id) => JSON.stringify(id)

/** The id the server gets for a caller's request, remembered with whose it is. */
const track = (session: Session, id: Id, method: string): number => {
  const internal = session.nextId++
  // the first line was that initialize, so the first one the server gets is it
  const early = method === "initialize" ? session.answered : undefined
  if (early !== undefined) session.answered = undefined
  session.pending.set(internal, { id, method, cancelled: false, answered: early })
  session.inFlight.set(keyOf(id), internal)
  return internal
}

/** Marks the request in flight under a caller's id as cancelled; its server id, or undefined if none is. */
const cancel = (session: Session, requestId: unknown): number | undefined => {
  const internal = isId(requestId) ? session.inFlight.get(keyOf(requestId)) : undefined
  if (internal !== undefined) session.pending.get(internal)!.cancelled = true
  return internal
}

/** The request a response of the server's answers, forgotten as it is answered; undefined if it is none of the caller's. */
const settle = (session: Session, internal: unknown): Pending | undefined => {
  if (typeof internal !== "number") return undefined
  const entry = session.pending.get(internal)
  if (entry === undefined) return undefined
  session.pending.delete(internal)
  // the caller may have sent another request under this id since: that one stays cancellable
  if (session.inFlight.get(keyOf(entry.id)) === internal) session.inFlight.delete(keyOf(entry.id))
  return entry
}

// The way in: what each line of stdin becomes.

const reply = (line: string): Screened => ({ forward: [], replies: [line] })
const forward = (message: unknown): Screened => ({ forward: [JSON.stringify(message)], replies: [] })
const nothing: Screened = { forward: [], replies: [] }

const combine = (all: ReadonlyArray<Screened>): Screened => ({
  forward: all.flatMap((s) => s.forward),
  replies: all.flatMap((s) => s.replies)
})

/** A `tools/call`'s params as the server needs them, or why not. */
const callParams = (session: Session, params: Record<string, unknown> | undefined): Record<string, unknown> | string => {
  const { tools, toolList } = session
  if (params === undefined) return `tools/call needs params: the tool's name and its arguments, like {"name": "list_shells", "arguments": {}}`
  const name = params.name
  if (typeof name !== "string") return `tools/call needs "name", the tool to call (one of ${toolList}); got ${quote(name)}`
  if (!tools.has(name)) return `unknown tool ${quote(name)}: this server has ${toolList}; tools/list describes them`
  // MCP makes arguments optional, and the server rejects a call without them
  if (params.arguments === undefined) return { ...params, arguments: {} }
  if (!isRecord(params.arguments)) {
    return `the arguments of ${name} must be an object of its parameters (tools/list gives its input schema); got ${typeOf(params.arguments)}`
  }
  return params
}

/** A request goes to the server under an id it accepts, unless it is answered here: one the server would choke on or has no answer to. */
const request = (session: Session, message: Record<string, unknown>, method: string): Screened => {
  const id = message.id
  if (!isId(id)) return reply(errorLine(null, McpSchema.INVALID_REQUEST_ERROR_CODE, `a request id must be a string or a number; got ${quote(id)}`))
  if (!requestMethods.has(method)) {
    return reply(errorLine(id, McpSchema.METHOD_NOT_FOUND_ERROR_CODE, `unknown method ${quote(method)}: this server answers ${listed([...requestMethods])}`))
  }
  let params = message.params
  if (params !== undefined && !isRecord(params)) {
    return reply(errorLine(id, McpSchema.INVALID_PARAMS_ERROR_CODE, `the params of ${method} must be an object; got ${typeOf(params)}`))
  }
  if (method === "tools/call") {
    const checked = callParams(session, params)
    if (typeof checked === "string") return reply(errorLine(id, McpSchema.INVALID_PARAMS_ERROR_CODE, checked))
    params = checked
  }
  // the server sends shell notices as log messages, and has no levels to set
  if (method === "logging/setLevel") return reply(JSON.stringify({ jsonrpc: "2.0", id, result: {} }) + "\n")
  if (method === "initialize" && isRecord(params) && isRecord(params.clientInfo) && typeof params.clientInfo.name === "string") {
    session.options.onClientName?.(params.clientInfo.name)
  }
  const internal = track(session, id, method)
  return forward({ ...message, id: internal, ...(params === undefined ? {} : { params }) })
}

/** A notification gets no answer, even a bad one: what the server cannot take is dropped. */
const notification = (session: Session, message: Record<string, unknown>, method: string): Screened => {
  if (!notificationMethods.has(method)) return nothing
  const params = message.params
  if (params !== undefined && !isRecord(params)) return nothing
  if (method !== "notifications/cancelled") return forward(message)
  const internal = cancel(session, params?.requestId)
  // nothing in flight under that id: it was answered already, or never asked
  if (internal === undefined) return nothing
  return forward({ ...message, params: { ...params, requestId: internal } })
}

const one = (session: Session, message: unknown): Screened => {
  if (!isRecord(message)) {
    return reply(errorLine(null, McpSchema.INVALID_REQUEST_ERROR_CODE, `a JSON-RPC message is an object; got ${typeOf(message)}`))
  }
  if ("method" in message) {
    const method = message.method
    if (typeof method !== "string") {
      return reply(errorLine(isId(message.id) ? message.id : null, McpSchema.INVALID_REQUEST_ERROR_CODE, `method must be a string; got ${quote(method)}`))
    }
    // the server's own control messages (interrupts, acks) are not for clients to send
    return "id" in message ? request(session, message, method) : notification(session, message, method)
  }
  // an answer to a request of the server's, whose ids are integers
  if ("result" in message || "error" in message) return Number.isSafeInteger(message.id) ? forward(message) : nothing
  return reply(errorLine(isId(message.id) ? message.id : null, McpSchema.INVALID_REQUEST_ERROR_CODE, "a JSON-RPC message has a method (a request or a notification), or a result or an error (a response)"))
}

/**
 * One message, unless it nests too deeply. `JSON.parse` takes any depth,
 * but what follows it recurses: encoding a message for the server,
 * decoding it there, describing a bad argument. Some thousands of levels
 * overflowed the stack, and the server's reading of stdin died with it.
 * Such a request is answered with an error; such a notification, like any
 * bad one, is dropped.
 */
const screenOne = (session: Session, message: unknown): Screened => {
  if (!UntrustedJson.nestedDeeperThan(message, MAX_DEPTH)) return one(session, message)
  const id = isRecord(message) ? message.id : undefined
  if (isRecord(message) && "method" in message && id === undefined) return nothing
  return reply(errorLine(isId(id) ? id : null, McpSchema.INVALID_REQUEST_ERROR_CODE, `a message nested over ${MAX_DEPTH} levels deep: nest its values less deeply`))
}

/** What to do with one line of stdin. */
const screen = (session: Session, line: string): Screened => {
  if (line.trim() === "") return nothing
  let message: unknown
  try {
    message = JSON.parse(line)
  } catch (cause) {
    return reply(errorLine(null, McpSchema.PARSE_ERROR_CODE, `not JSON (${clip((cause as Error).message, 80)}): send one JSON-RPC message per line`))
  }
  if (!Array.isArray(message)) return screenOne(session, message)
  // a batch goes to the server one message at a time, so each is checked alone
  if (message.length === 0) return reply(errorLine(null, McpSchema.INVALID_REQUEST_ERROR_CODE, "an empty batch: send at least one message"))
  return combine(message.map((each) => screenOne(session, each)))
}

const tooLong = (chars: number): Screened =>
  reply(errorLine(null, McpSchema.INVALID_REQUEST_ERROR_CODE, `a message of ${chars} characters is over the limit of ${MAX_LINE_CHARS}: send less in one message`))

/**
 * stdin as the server should see it: well-formed messages only, one per
 * line. Answers to what never reaches the server go to `reply`.
 */
const input = (session: Session) =>
<E, R>(reply: (text: string) => Effect.Effect<unknown>) =>
(stdin: Stream.Stream<Uint8Array, E, R>): Stream.Stream<Uint8Array, E, R> =>
  stdin.pipe(
    Stream.decodeText(),
    boundedLines(MAX_LINE_CHARS),
    Stream.map((piece) => (piece._tag === "TooLong" ? tooLong(piece.chars) : screen(session, piece.text))),
    Stream.mapEffect((screened) =>
      Effect.as(screened.replies.length === 0 ? Effect.void : reply(screened.replies.join("")), screened.forward)
    ),
    Stream.filter((lines) => lines.length > 0),
    Stream.map((lines) => lines.map((line) => `${line}\n`).join("")),
    Stream.encodeText
  )

// The way out: what each line the server writes becomes.

/** One line the server wrote, as the client gets it; undefined to drop it. */
const restoreLine = (session: Session, line: string): string | undefined => {
  let message: unknown
  try {
    message = JSON.parse(line)
  } catch {
    return line
  }
  if (!isRecord(message) || "method" in message) return line
  const error = isRecord(message.error) ? message.error : undefined
  if (error?._tag === "Defect") {
    // the server lost track of which request this was
    const defect = typeof error.data === "string" ? error.data : JSON.stringify(error.data) ?? ""
    return errorLine(null, McpSchema.INTERNAL_ERROR_CODE, `internal error: ${clip(defect, 120)}`).trimEnd()
  }
  const entry = settle(session, message.id)
  if (entry === undefined) return line
  if (entry.cancelled) return undefined
  return response(session.options, entry, message.result, error)
}

/**
 * The server's response to a caller's request, under the caller's id and
 * with a short error; undefined when the client had its answer already
 * (sent early), which the server's is only compared with.
 */
const response = (options: Options, entry: Pending, result: unknown, error: Record<string, unknown> | undefined): string | undefined => {
  if (entry.method === "initialize") options.onInitialized?.()
  const restored = error === undefined
    ? JSON.stringify({ jsonrpc: "2.0", id: entry.id, result: entry.method === "initialize" ? withLogging(result) : result })
    : JSON.stringify({ jsonrpc: "2.0", id: entry.id, error: shortError(entry.method, error) })
  if (entry.answered === undefined) return restored
  if (`${restored}\n` !== entry.answered) options.onAnsweredDiffers?.(entry.answered, restored)
  return undefined
}

/** What the server wrote (one or more lines), as the client gets it. */
const restore = (session: Session, data: string): string => {
  const lines: Array<string> = []
  for (const line of data.split("\n")) {
    if (line === "") continue
    const restored = restoreLine(session, line)
    if (restored !== undefined) lines.push(restored + "\n")
  }
  return lines.join("")
}

/** The server's stdout, with callers' ids restored, short errors, and no answers to cancelled requests. */
const output = (session: Session) =>
<A, L, E, R>(stdout: Sink.Sink<A, string | Uint8Array, L, E, R>): Sink.Sink<A, string | Uint8Array, L, E, R> =>
  Sink.mapInputChunks(stdout, (chunk: Chunk.Chunk<string | Uint8Array>) =>
    Chunk.filter(
      Chunk.map(chunk, (data) => (typeof data === "string" ? restore(session, data) : data)),
      (data) => data.length > 0
    ))

/** An error the client can act on, in place of the server's dump of an Effect `Cause`. */
const shortError = (method: string, error: Record<string, unknown>): { code: number; message: string } => {
  const cause = error._tag === "Cause" ? error.data : undefined
  if (!isRecord(cause)) {
    const code = typeof error.code === "number" && error.code !== 0 ? error.code : McpSchema.INTERNAL_ERROR_CODE
    return { code, message: clip(typeof error.message === "string" ? error.message : `${method} failed`) }
  }
  const failure = findCause(cause, "Fail")
  if (failure !== undefined && isRecord(failure.error) && typeof failure.error.message === "string") {
    const code = typeof failure.error.code === "number" ? failure.error.code : McpSchema.INTERNAL_ERROR_CODE
    return { code, message: clip(failure.error.message) }
  }
  const death = findCause(cause, "Die")
  if (death !== undefined && typeof death.defect === "string" && /Expected |is missing|is unexpected/.test(death.defect)) {
    return { code: McpSchema.INVALID_PARAMS_ERROR_CODE, message: `invalid params for ${method}: ${summarizeParseError(death.defect)}` }
  }
  if (death === undefined && findCause(cause, "Interrupt") !== undefined) {
    return { code: McpSchema.INTERNAL_ERROR_CODE, message: `${method} was interrupted: the server is stopping. Start it again and retry.` }
  }
  const what = death === undefined ? "" : `: ${clip(typeof death.defect === "string" ? death.defect : JSON.stringify(death.defect) ?? "", 120)}`
  return { code: McpSchema.INTERNAL_ERROR_CODE, message: `internal error in ${method}${what}. Retry; if it persists, report it with corral's stderr.` }
}

/** An initialize result that declares the log messages the server sends (shell notices). */
const withLogging = (result: unknown) =>
  isRecord(result) && isRecord(result.capabilities) ? { ...result, capabilities: { ...result.capabilities, logging: {} } } : result

/** The first part of an encoded `Cause` with this tag, looking through sequential and parallel ones. */
const findCause = (cause: Record<string, unknown>, tag: string): Record<string, unknown> | undefined => {
  if (cause._tag === tag) return cause
  for (const side of [cause.left, cause.right]) {
    const found = isRecord(side) ? findCause(side, tag) : undefined
    if (found !== undefined) return found
  }
  return undefined
}

/** `path: issue` from a schema error drawn as a tree: the keys down to the deepest issue. */
const summarizeParseError = (tree: string): string => {
  const lines = tree.split("\n")
  const keys = lines.flatMap((line) => [...line.matchAll(/└─ \["([^"]*)"\]/g)].map((m) => m[1]!))
  const issue = lines[lines.length - 1]!.replace(/^[\s└─├│]+/, "")
  return clip(keys.length === 0 ? issue : `${keys.join(".")}: ${issue}`, 160)
}

export type Wire = ReturnType<typeof make>
