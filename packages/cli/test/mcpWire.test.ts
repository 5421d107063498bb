/**
 * The guard between corral's stdio and the MCP server, line by line: what it
 * answers itself, what it passes on (and with which id), and how it shortens
 * the server's errors. `test/mcp-wire.test.ts` runs the same through the real
 * server.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Sink from "effect/Sink"
import * as Stream from "effect/Stream"
import * as McpWire from "../src/internal/mcpWire.js"

const tools = ["bash", "bash_output", "kill_bash", "list_shells", "write_stdin"]

const parse = (lines: ReadonlyArray<string>) => lines.map((line) => JSON.parse(line))

/** The one error answered for `line`, which reaches no server. */
const answered = (line: string) => {
  const screened = McpWire.make({ tools }).screen(line)
  expect(screened.forward).toEqual([])
  expect(screened.replies).toHaveLength(1)
  return JSON.parse(screened.replies[0]!)
}

describe("McpWire.screen", () => {
  it("ignores blank lines", () => {
    const wire = McpWire.make({ tools })
    for (const line of ["", "   ", "\r", "\t \r"]) expect(wire.screen(line)).toEqual({ forward: [], replies: [] })
  })

  it("answers a line that is not JSON with a parse error, id null", () => {
    expect(answered("garbage")).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: `not JSON (Unexpected token 'g', "garbage" is not valid JSON): send one JSON-RPC message per line` }
    })
    expect(answered(`{"jsonrpc":"2.0","id":1,"method":"ping"`).error.code).toBe(-32700)
  })

  it("answers JSON that is no message with an invalid request", () => {
    for (const [line, message] of [
      ["null", "a JSON-RPC message is an object; got null"],
      ["42", "a JSON-RPC message is an object; got a number"],
      ["[]", "an empty batch: send at least one message"],
      [`{"jsonrpc":"2.0"}`, "a JSON-RPC message has a method (a request or a notification), or a result or an error (a response)"],
      [`{"jsonrpc":"2.0","id":7,"method":5}`, "method must be a string; got 5"],
      [`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "a request id must be a string or a number; got null"],
      [`{"jsonrpc":"2.0","id":{},"method":"ping"}`, "a request id must be a string or a number; got {}"]
    ] as const) {
      expect({ line, ...answered(line).error }).toEqual({ line, code: -32600, message })
    }
    expect(answered(`{"jsonrpc":"2.0","id":7,"method":5}`).id).toBe(7)
  })

  it("answers an unknown method, an unknown tool and bad call params with the caller's id", () => {
    expect(answered(`{"jsonrpc":"2.0","id":"a","method":"tools/run"}`)).toMatchObject({
      id: "a",
      error: { code: -32601, message: expect.stringMatching(/^unknown method "tools\/run": this server answers ping, initialize, .* tools\/call and tools\/list$/) }
    })
    expect(answered(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)).toEqual({
      jsonrpc: "2.0",
      id: 2,
      error: { code: -32602, message: `unknown tool "nope": this server has bash, bash_output, kill_bash, list_shells and write_stdin; tools/list describes them` }
    })
    expect(answered(`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`).error).toEqual({
      code: -32602,
      message: `tools/call needs params: the tool's name and its arguments, like {"name": "list_shells", "arguments": {}}`
    })
    expect(answered(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}`).error.message).toBe(
      `tools/call needs "name", the tool to call (one of bash, bash_output, kill_bash, list_shells and write_stdin); got undefined`
    )
    expect(answered(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":"ls"}}`).error.message).toBe(
      "the arguments of bash must be an object of its parameters (tools/list gives its input schema); got a string"
    )
    expect(answered(`{"jsonrpc":"2.0","id":6,"method":"ping","params":[1]}`).error).toEqual({
      code: -32602,
      message: "the params of ping must be an object; got an array"
    })
  })

  it("passes requests on under ids of its own, and gives each answer its caller's id back", () => {
    const wire = McpWire.make({ tools })
    const ids = ["x-1", 1.5, -3, 0]
    const forwarded = ids.map((id) => parse(wire.screen(JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })).forward)[0])
    expect(forwarded.map((m) => m.id)).toEqual([1, 2, 3, 4])
    const answers = forwarded.map((m) => wire.restore(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: {} }) + "\n"))
    expect(answers.map((a) => JSON.parse(a).id)).toEqual(ids)
  })

  it("fills in the arguments of a tool call without them", () => {
    const wire = McpWire.make({ tools })
    const [call] = parse(wire.screen(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_shells"}}`).forward)
    expect(call.params).toEqual({ name: "list_shells", arguments: {} })
  })

  it("drops notifications the server cannot take, and what answers nothing it asked", () => {
    const wire = McpWire.make({ tools })
    for (const line of [
      `{"jsonrpc":"2.0","method":"notifications/nonsense"}`,
      `{"jsonrpc":"2.0","method":"@effect/rpc/Interrupt","params":{"requestId":"abc"}}`,
      `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-asked"}}`,
      `{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}`,
      `{"jsonrpc":"2.0","id":"abc","result":{}}`
    ]) {
      expect({ line, ...wire.screen(line) }).toEqual({ line, forward: [], replies: [] })
    }
  })

  it("splits a batch into messages checked one by one", () => {
    const wire = McpWire.make({ tools })
    const screened = wire.screen(`[{"jsonrpc":"2.0","id":"a","method":"ping"},17,{"jsonrpc":"2.0","id":"b","method":"ping"}]`)
    expect(parse(screened.forward).map((m) => m.id)).toEqual([1, 2])
    expect(parse(screened.replies).map((m) => m.error.code)).toEqual([-32600])
  })

  it("drops the answer to a request the client cancelled, and passes the cancel on under the server's id", () => {
    const wire = McpWire.make({ tools })
    wire.screen(`{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 9"}}}`)
    const [cancel] = parse(wire.screen(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-9"}}`).forward)
    expect(cancel.params).toEqual({ requestId: 1 })
    const interrupted = { _tag: "Cause", code: 0, message: "...", data: { _tag: "Interrupt", fiberId: { _tag: "Runtime", id: 1, startTimeMillis: 0 } } }
    expect(wire.restore(JSON.stringify({ jsonrpc: "2.0", id: 1, error: interrupted }) + "\n")).toBe("")
  })
})

describe("McpWire.restore", () => {
  const failed = (wire: McpWire.Wire, method: string, error: unknown) => {
    const [request] = parse(wire.screen(JSON.stringify({ jsonrpc: "2.0", id: "r", method, params: { name: "bash", arguments: {} } })).forward)
    const text = wire.restore(JSON.stringify({ jsonrpc: "2.0", id: request.id, error }) + "\n")
    expect(text.endsWith("\n")).toBe(true)
    return JSON.parse(text)
  }

  it("turns the dump of a schema error into one line naming the parameter", () => {
    const defect = `{ readonly _meta?: { readonly progressToken?: string | number | undefined } | undefined; readonly protocolVersion: string }\n└─ ["protocolVersion"]\n   └─ is missing`
    const cause = { _tag: "Cause", code: 0, message: JSON.stringify({ _tag: "Die", defect }), data: { _tag: "Die", defect } }
    expect(failed(McpWire.make({ tools }), "initialize", cause)).toEqual({
      jsonrpc: "2.0",
      id: "r",
      error: { code: -32602, message: "invalid params for initialize: protocolVersion: is missing" }
    })
  })

  it("keeps a failure's own code and message, without the cause", () => {
    const error = { code: -32602, message: "Tool 'x' not found" }
    const cause = { _tag: "Cause", code: -32602, message: "Tool 'x' not found", data: { _tag: "Fail", error } }
    expect(failed(McpWire.make({ tools }), "tools/call", cause).error).toEqual(error)
  })

  it("says an interrupted request was interrupted, in one short line", () => {
    const interrupt = { _tag: "Interrupt", fiberId: { _tag: "Runtime", id: 27, startTimeMillis: 1 } }
    let data: Record<string, unknown> = { _tag: "Empty" }
    for (let i = 0; i < 40; i++) data = { _tag: "Sequential", left: data, right: interrupt }
    const error = failed(McpWire.make({ tools }), "tools/call", { _tag: "Cause", code: 0, message: JSON.stringify(data), data }).error
    expect(error).toEqual({ code: -32603, message: "tools/call was interrupted: the server is stopping. Start it again and retry." })
  })

  it("shortens a defect the server could not place", () => {
    const text = McpWire.make({ tools }).restore(
      JSON.stringify({ jsonrpc: "2.0", id: -32603, error: { _tag: "Defect", code: 1, message: "A defect occurred", data: "x".repeat(5000) } }) + "\n"
    )
    const message = JSON.parse(text)
    expect(message).toMatchObject({ id: null, error: { code: -32603 } })
    expect(message.error.message.length).toBeLessThan(200)
  })

  it("drops the server's answer to the initialize answered before it loaded, and says when it differs", () => {
    const result = { protocolVersion: "2025-06-18", capabilities: { completions: {} }, serverInfo: { name: "corral", version: "1" } }
    const early = JSON.stringify({ jsonrpc: "2.0", id: "i", result: { ...result, capabilities: { completions: {}, logging: {} } } }) + "\n"
    const differs: Array<string> = []
    let initialized = 0
    const wire = McpWire.make({ tools, answered: early, onAnsweredDiffers: (_, server) => differs.push(server), onInitialized: () => initialized++ })
    const initialize = (id: string) => parse(wire.screen(JSON.stringify({ jsonrpc: "2.0", id, method: "initialize", params: {} })).forward)[0]
    expect(wire.restore(JSON.stringify({ jsonrpc: "2.0", id: initialize("i").id, result }) + "\n")).toBe("")
    expect({ differs, initialized }).toEqual({ differs: [], initialized: 1 })
    // only the first: a second initialize is answered by the server, and a different answer is told
    expect(JSON.parse(wire.restore(JSON.stringify({ jsonrpc: "2.0", id: initialize("j").id, result }) + "\n"))).toMatchObject({ id: "j" })
    const other = McpWire.make({ tools, answered: early, onAnsweredDiffers: (_, server) => differs.push(server) })
    const [request] = parse(other.screen(JSON.stringify({ jsonrpc: "2.0", id: "i", method: "initialize", params: {} })).forward)
    expect(other.restore(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { ...result, protocolVersion: "2024-11-05" } }) + "\n")).toBe("")
    expect(differs).toEqual([expect.stringContaining(`"protocolVersion":"2024-11-05"`)])
  })

  it("passes the server's own requests and notifications through as they are", () => {
    const wire = McpWire.make({ tools })
    const line = `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n`
    expect(wire.restore(line)).toBe(line)
  })
})

describe("McpWire streams", () => {
  const run = (wire: McpWire.Wire, chunks: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const replies: Array<string> = []
      const input = Stream.fromIterable(chunks.map((c) => new TextEncoder().encode(c))).pipe(
        wire.input((text) => Effect.sync(() => replies.push(text)))
      )
      const forwarded = yield* Stream.runCollect(Stream.decodeText(input))
      return { forwarded: Chunk.toReadonlyArray(forwarded).join(""), replies: replies.join("") }
    })

  it.effect("serves the lines after a bad one, across chunk boundaries", () =>
    Effect.gen(function*() {
      const wire = McpWire.make({ tools })
      const { forwarded, replies } = yield* run(wire, ["\n\ngarb", "age\n{\"jsonrpc\":\"2.0\",\"id\":\"p\",", "\"method\":\"ping\"}\n\n"])
      expect(forwarded).toBe(`{"jsonrpc":"2.0","id":1,"method":"ping"}\n`)
      expect(parse(replies.trimEnd().split("\n")).map((m) => m.error.code)).toEqual([-32700])
    }))

  it.effect("skips a line over the limit without keeping it, and reads on", () =>
    Effect.gen(function*() {
      const wire = McpWire.make({ tools })
      const big = "x".repeat(McpWire.MAX_LINE_CHARS / 4)
      const { forwarded, replies } = yield* run(wire, ["{\"a\":\"", big, big, big, big, big, "\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"])
      expect(forwarded).toBe(`{"jsonrpc":"2.0","id":1,"method":"ping"}\n`)
      expect(JSON.parse(replies).error).toEqual({
        code: -32600,
        message: `a message of ${5 * big.length + 8} characters is over the limit of ${McpWire.MAX_LINE_CHARS}: send less in one message`
      })
    }))

  it.effect("restores ids on the way out and drops what is left empty", () =>
    Effect.gen(function*() {
      const wire = McpWire.make({ tools })
      wire.screen(`{"jsonrpc":"2.0","id":"q","method":"ping"}`)
      const written: Array<string | Uint8Array> = []
      const sink = wire.output(Sink.forEach((data: string | Uint8Array) => Effect.sync(() => written.push(data))))
      yield* Stream.run(Stream.make(`{"jsonrpc":"2.0","id":1,"result":{}}\n`), sink)
      expect(written).toEqual([`{"jsonrpc":"2.0","id":"q","result":{}}\n`])
    }))
})
