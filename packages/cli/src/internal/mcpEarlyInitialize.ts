/**
 * `corral mcp`'s answer to `initialize`, given by the dispatcher before the
 * server's code is loaded (docs/adr/0024-mcp-early-initialize.md). An MCP
 * client sends `initialize` as soon as it has spawned the server, and waits
 * for its answer; compiling and starting the server (effect, @effect/ai, the
 * registry) takes twice what a bare Node start does, and that answer needs
 * none of it: it depends on the request's protocol version alone.
 *
 * So the dispatcher reads stdin up to its first line. When that line is an
 * `initialize` request the server would accept, it writes the server's
 * answer, then loads the server and hands it every byte it read: the server
 * sees stdin whole, as if it had read it itself, takes the request (the
 * client's name and capabilities), and its own answer to it is not sent
 * again (mcpWire.ts). Anything else (another first line, garbage, no line
 * within FIRST_LINE_WAIT_MS, a terminal or a file on stdin, an unknown
 * option) is left to the server, as before.
 *
 * Node built-ins only: this runs in the dispatcher, before effect is loaded.
 */
import * as fs from "node:fs"
import type { Readable } from "node:stream"
import { parseArgs } from "node:util"
import { options } from "./mcpOptions.js"
import { writeOut } from "./print.js"

/** The server's name in `serverInfo`. */
export const SERVER_NAME = "corral"

/**
 * The protocol versions @effect/ai 0.37's McpServer answers with as asked;
 * any other request gets the latest. Its own list is not exported: the tests
 * compare this answer with the server's for each of these and the MCP SDK's.
 */
export const LATEST_PROTOCOL_VERSION = "2025-06-18"
export const SUPPORTED_PROTOCOL_VERSIONS: ReadonlyArray<string> = [LATEST_PROTOCOL_VERSION, "2025-03-26", "2024-11-05", "2024-10-07"]

/**
 * How long the dispatcher waits for the first line before it loads the
 * server anyway. A client writes `initialize` right after the spawn, so it is
 * there by the time Node has started; a client that waits longer finds the
 * server loaded this much later than before.
 */
export const FIRST_LINE_WAIT_MS = 50

/** A first line longer than this is not an `initialize` worth reading here (theirs are a few hundred bytes). */
export const FIRST_LINE_MAX_BYTES = 64 * 1024

/** What the dispatcher read of stdin, for the server to go on from. */
export interface Handover {
  /** Every byte read from stdin, the first line included: the server reads them first. */
  readonly read: Uint8Array
  /** stdin ended while it was read: nothing more comes. */
  readonly ended: boolean
  /** The answer to the first line sent already, with its newline, or undefined when none was. */
  readonly answered: string | undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const optional = (value: unknown, check: (value: unknown) => boolean) => value === undefined || check(value)
const isString = (value: unknown) => typeof value === "string"

/**
 * Whether the server's schema takes these params: a narrower check than its
 * own (what passes here passes there), so an answer given here is the one the
 * server would give, and anything in doubt is left to the server.
 */
const acceptable = (params: unknown): boolean => {
  if (!isRecord(params) || typeof params.protocolVersion !== "string") return false
  const { _meta: meta, capabilities, clientInfo } = params
  if (!optional(meta, (m) => isRecord(m) && optional(m.progressToken, (t) => isString(t) || Number.isFinite(t)))) return false
  if (!isRecord(capabilities) || !isRecord(clientInfo)) return false
  const { experimental, roots, sampling, elicitation } = capabilities
  if (!optional(experimental, (e) => isRecord(e) && Object.values(e).every(isRecord))) return false
  if (!optional(roots, (r) => isRecord(r) && optional(r.listChanged, (l) => typeof l === "boolean"))) return false
  if (!optional(sampling, isRecord) || !optional(elicitation, isRecord)) return false
  return isString(clientInfo.name) && isString(clientInfo.version) && optional(clientInfo.title, isString)
}

/**
 * The server's answer to `line`, with its newline, when `line` is an
 * `initialize` request it accepts; else undefined. `version` is corral's.
 */
export const answer = (line: string, version: string): string | undefined => {
  let message: unknown
  try {
    message = JSON.parse(line)
  } catch {
    return undefined
  }
  if (!isRecord(message) || message.jsonrpc !== "2.0" || message.method !== "initialize") return undefined
  const { id, params } = message
  if (!(isString(id) || Number.isFinite(id)) || !acceptable(params)) return undefined
  const requested = (params as { readonly protocolVersion: string }).protocolVersion
  // as McpServer encodes it, with the logging capability mcpWire.ts adds (shell notices)
  const result = {
    protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION,
    capabilities: { completions: {}, tools: { listChanged: true }, logging: {} },
    serverInfo: { name: SERVER_NAME, version }
  }
  return JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n"
}

/** What `readFirstLine` found: the bytes read, whether stdin ended, and the first line if it came whole. */
export interface FirstLine {
  readonly read: Uint8Array
  readonly ended: boolean
  readonly line: string | undefined
}

/**
 * Reads `stream` up to its first newline, its end, `maxBytes`, or `waitMs`,
 * whichever comes first, then stops reading: what it did not take stays in
 * the stream for the next reader, in order.
 */
export const readFirstLine = (stream: Readable, waitMs: number, maxBytes: number): Promise<FirstLine> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let done = false
    const finish = (ended: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      stream.off("readable", onReadable)
      stream.off("end", onEnd)
      stream.off("error", onError)
      const read = Buffer.concat(chunks)
      const newline = read.indexOf(0x0a)
      resolve({ read, ended, line: newline === -1 ? undefined : read.subarray(0, newline).toString("utf8") })
    }
    const onReadable = () => {
      for (let chunk: Buffer | null; !done && (chunk = stream.read()) !== null;) {
        chunks.push(chunk)
        size += chunk.length
        if (chunk.includes(0x0a) || size > maxBytes) finish(false)
      }
    }
    const onEnd = () => finish(true)
    // the stream is destroyed: its next reader sees it ended, as the server does a broken stdin
    const onError = () => finish(true)
    const timer = setTimeout(() => finish(false), waitMs)
    stream.on("readable", onReadable)
    stream.once("end", onEnd)
    stream.once("error", onError)
  })

/** Whether stdin is what an MCP client gives its server: a pipe or a socket (not a terminal, not a file). */
const stdinIsPipe = (): boolean => {
  try {
    const stat = fs.fstatSync(0)
    return stat.isFIFO() || stat.isSocket()
  } catch {
    return false
  }
}

/** Whether `args` is a command line that serves (known options, no --help, no words). */
const serves = (args: ReadonlyArray<string>): boolean => {
  try {
    return parseArgs({ args: [...args], options, strict: true, allowPositionals: false }).values.help !== true
  } catch {
    return false
  }
}

/**
 * For the dispatcher, before `corral mcp args` is loaded: answers the first
 * line of stdin when it is an `initialize`, and says what was read. Undefined
 * when stdin was not read at all.
 */
export const start = async (args: ReadonlyArray<string>, version: () => string): Promise<Handover | undefined> => {
  if (!serves(args) || !stdinIsPipe()) return undefined
  const first = await readFirstLine(process.stdin, FIRST_LINE_WAIT_MS, FIRST_LINE_MAX_BYTES)
  const answered = first.line === undefined ? undefined : answer(first.line, version())
  if (answered !== undefined) writeOut(answered)
  return { read: first.read, ended: first.ended, answered }
}
