/**
 * The dispatcher's answer to `initialize` (before the server is loaded) and
 * its read of stdin's first line. `test/mcp-early-initialize.test.ts`
 * compares the answer with the real server's, through the bin.
 */
import { PassThrough } from "node:stream"
import { describe, expect, it } from "@effect/vitest"
import * as McpEarlyInitialize from "../src/internal/mcpEarlyInitialize.js"

const initialize = (params: unknown, id: unknown = 1) => JSON.stringify({ jsonrpc: "2.0", id, method: "initialize", params })
const good = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "agent", version: "1.0" } }
const answer = (line: string) => McpEarlyInitialize.answer(line, "9.9.9")

describe("McpEarlyInitialize.answer", () => {
  it("answers an initialize the server accepts, with the version asked when the server speaks it, else its latest", () => {
    for (const version of McpEarlyInitialize.SUPPORTED_PROTOCOL_VERSIONS) {
      expect(answer(initialize({ ...good, protocolVersion: version }, "a"))).toBe(
        `{"jsonrpc":"2.0","id":"a","result":{"protocolVersion":"${version}","capabilities":{"completions":{},"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"corral","version":"9.9.9"}}}\n`
      )
    }
    expect(JSON.parse(answer(initialize({ ...good, protocolVersion: "1999-01-01" }, 7))!)).toMatchObject({ id: 7, result: { protocolVersion: "2025-06-18" } })
  })

  it("answers what the server's schema lets through: client capabilities, _meta, extra fields", () => {
    const rich = {
      ...good,
      _meta: { progressToken: "p" },
      capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {}, experimental: { x: {} }, other: 1 },
      clientInfo: { name: "agent", title: "Agent", version: "1", icons: [] },
      extra: true
    }
    expect(answer(initialize(rich))).toContain(`"serverInfo":{"name":"corral","version":"9.9.9"}`)
  })

  it("leaves to the server every line it might answer otherwise", () => {
    const lines = [
      "",
      "not json",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"",
      "null",
      `[${initialize(good)}]`,
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      JSON.stringify({ jsonrpc: "2.0", method: "initialize", params: good }),
      JSON.stringify({ id: 1, method: "initialize", params: good }),
      initialize(good, null),
      initialize(good, { n: 1 }),
      initialize(undefined),
      initialize({ ...good, protocolVersion: 20250618 }),
      initialize({ ...good, capabilities: undefined }),
      initialize({ ...good, capabilities: { roots: { listChanged: "yes" } } }),
      initialize({ ...good, capabilities: { sampling: "yes" } }),
      initialize({ ...good, capabilities: { experimental: { x: 1 } } }),
      initialize({ ...good, clientInfo: { name: "agent" } }),
      initialize({ ...good, clientInfo: { name: 1, version: "1" } }),
      initialize({ ...good, clientInfo: { name: "agent", version: "1", title: null } }),
      initialize({ ...good, _meta: { progressToken: {} } })
    ]
    for (const line of lines) expect(answer(line), line).toBeUndefined()
  })
})

/** A stream like stdin, fed `chunks` one event-loop turn apart. */
const fed = (chunks: ReadonlyArray<string>, end: boolean) => {
  const stream = new PassThrough()
  void (async () => {
    for (const chunk of chunks) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      stream.write(chunk)
    }
    if (end) stream.end()
  })()
  return stream
}

/** What a reader after `readFirstLine` gets: the rest of the stream, to its end. */
const rest = async (stream: PassThrough) => {
  let text = ""
  for await (const chunk of stream) text += chunk
  return text
}

const text = (first: McpEarlyInitialize.FirstLine) => Buffer.from(first.read).toString("utf8")

describe("McpEarlyInitialize.readFirstLine", () => {
  it("reads a line split across reads whole, and leaves what follows its chunk to the next reader, in order", async () => {
    const stream = fed(["{\"a\":", "1}\n{\"b\"", ":2}\n", "{\"c\":3}\n"], true)
    const first = await McpEarlyInitialize.readFirstLine(stream, 5_000, 1024)
    expect(first).toMatchObject({ line: "{\"a\":1}", ended: false })
    expect(text(first) + (await rest(stream))).toBe("{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n")
  })

  it("says when the stream ended before a whole line, with what came", async () => {
    const stream = fed(["{\"a\":"], true)
    const first = await McpEarlyInitialize.readFirstLine(stream, 5_000, 1024)
    expect(first).toMatchObject({ line: undefined, ended: true })
    expect(text(first)).toBe("{\"a\":")
    expect(stream.readableEnded).toBe(true)
  })

  it("says when nothing came at all before the end", async () => {
    const first = await McpEarlyInitialize.readFirstLine(fed([], true), 5_000, 1024)
    expect(first).toMatchObject({ line: undefined, ended: true })
    expect(first.read.length).toBe(0)
  })

  it("stops waiting after its time, and the next reader gets the rest", async () => {
    const stream = new PassThrough()
    stream.write("{\"a\":")
    const first = await McpEarlyInitialize.readFirstLine(stream, 30, 1024)
    expect(first).toMatchObject({ line: undefined, ended: false })
    stream.end("1}\n")
    expect(text(first) + (await rest(stream))).toBe("{\"a\":1}\n")
  })

  it("stops at its byte limit without a line", async () => {
    const stream = fed(["x".repeat(600), "y".repeat(600), "z\n"], true)
    const first = await McpEarlyInitialize.readFirstLine(stream, 5_000, 1024)
    expect(first).toMatchObject({ line: undefined, ended: false })
    expect(text(first) + (await rest(stream))).toBe(`${"x".repeat(600)}${"y".repeat(600)}z\n`)
  })
})
