/**
 * `corral mcp` answers `initialize` before its server is loaded
 * (docs/adr/0024-mcp-early-initialize.md). Each session here runs twice on
 * the same bytes: through the bin, where the dispatcher reads the first line,
 * and through the bundled server alone (`mcp.cjs`'s `main`, as the bin ran
 * it before), which reads stdin itself; what the client gets must be the
 * same. That the client's `clientInfo.name` still names the supervisor is
 * tested through the MCP SDK's client in mcp.test.ts, whose `initialize` is
 * answered early.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as McpEarlyInitialize from "../packages/cli/src/internal/mcpEarlyInitialize.js"
import { corralBin } from "./fixtures/mcpHarness.js"

const mcpBundle = fileURLToPath(new URL("../packages/cli/bundle/mcp.cjs", import.meta.url))
const cliVersion: string = JSON.parse(fs.readFileSync(new URL("../packages/cli/package.json", import.meta.url), "utf8")).version
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-early-init-"))
afterAll(() => fs.rmSync(stateDir, { recursive: true, force: true }))

type Way = "bin" | "server alone"

const argv = (way: Way) =>
  way === "bin" ? [corralBin, "mcp"] : ["-e", "require(process.argv[1]).main([])", mcpBundle]

interface Session {
  readonly lines: ReadonlyArray<string>
  readonly stderr: string
  readonly code: number | null
}

/**
 * `corral mcp` fed `chunks` (each after `gapMs`), then, once it has written
 * `lines` lines (or at once, if none are awaited), its stdin closed.
 */
const session = (way: Way, chunks: ReadonlyArray<string>, lines: number, gapMs = 0): Promise<Session> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv(way), { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, CORRAL_STATE_DIR: stateDir } })
    let out = ""
    let stderr = ""
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
    const closeOnceAnswered = () => {
      if (out.split("\n").length > lines) child.stdin.end()
    }
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      out += text
      closeOnceAnswered()
    })
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ lines: out.split("\n").filter((line) => line !== ""), stderr, code })
    })
    void (async () => {
      for (const chunk of chunks) {
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs))
        child.stdin.write(chunk)
      }
      closeOnceAnswered()
    })()
  })

/** The session through the bin and through the server alone, which must be the same; the bin's. */
const sameBothWays = async (chunks: ReadonlyArray<string>, lines: number, gapMs = 0) => {
  const [bin, alone] = await Promise.all([session("bin", chunks, lines, gapMs), session("server alone", chunks, lines, gapMs)])
  expect(bin).toEqual(alone)
  return bin
}

const initialize = (id: number | string, protocolVersion: string, clientInfo: Record<string, unknown> = { name: "early", version: "1" }) =>
  JSON.stringify({ jsonrpc: "2.0", id, method: "initialize", params: { protocolVersion, capabilities: { roots: { listChanged: true } }, clientInfo } })

const versions = [...new Set([...McpEarlyInitialize.SUPPORTED_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION, "1999-01-01", ""])]

describe("corral mcp's answer to initialize before its server loads", () => {
  it("is the server's own, for every protocol version the server or the MCP SDK knows and one neither does", async () => {
    const requests = versions.map((version, i) => initialize(i + 1, version))
    const alone = await session("server alone", requests.map((r) => `${r}\n`), requests.length)
    expect(alone.code).toBe(0)
    expect(alone.stderr).toBe("")
    expect(alone.lines.map((line) => `${line}\n`)).toEqual(requests.map((r) => McpEarlyInitialize.answer(r, cliVersion)))
  })

  it("is what the client gets through the bin, and the server's own answer is not sent again", async () => {
    for (const version of [LATEST_PROTOCOL_VERSION, "2024-11-05", "1999-01-01"]) {
      const request = initialize("first", version)
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" })
      // the ping is answered by the server once it has loaded: no second answer to initialize comes before or after it
      const bin = await sameBothWays([`${request}\n${ping}\n`], 2)
      expect(bin.lines).toEqual([McpEarlyInitialize.answer(request, cliVersion)!.trimEnd(), `{"jsonrpc":"2.0","id":2,"result":{}}`])
      expect(bin.stderr).toBe("")
    }
  })

  it("comes whole from a first line split across reads", async () => {
    const request = initialize(1, LATEST_PROTOCOL_VERSION)
    const bin = await sameBothWays([request.slice(0, 40), request.slice(40, 90), `${request.slice(90)}\n`], 1, 10)
    expect(bin.lines).toEqual([McpEarlyInitialize.answer(request, cliVersion)!.trimEnd()])
  })

  it("leaves every other first line to the server, as before", async () => {
    const later = `${initialize(9, LATEST_PROTOCOL_VERSION)}\n`
    const firstLines = [
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })}\n`,
      "not json at all\n",
      "\n",
      `[${initialize(1, LATEST_PROTOCOL_VERSION)}]\n`,
      `${initialize(1, LATEST_PROTOCOL_VERSION, { name: "early", version: "1", title: null })}\n`,
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "nope" } })}\n`
    ]
    for (const first of firstLines) {
      const bin = await sameBothWays([first, later], first === "\n" ? 1 : 2)
      expect(bin.code).toBe(0)
      expect(bin.lines.at(-1)).toBe(McpEarlyInitialize.answer(later.trimEnd(), cliVersion)!.trimEnd())
    }
  })

  it("is not given when stdin ends before a whole line: the server exits 0 without a word, as before", async () => {
    for (const chunks of [[], [initialize(1, LATEST_PROTOCOL_VERSION)]]) {
      const bin = await sameBothWays(chunks, 0)
      expect(bin).toEqual({ lines: [], stderr: "", code: 0 })
    }
  })
})
