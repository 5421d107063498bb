/**
 * `corral mcp` started exactly as Claude Code starts an MCP server: the MCP
 * SDK's `StdioClientTransport` with no `env`, so the server gets the SDK's
 * default environment, HOME, LOGNAME, PATH, SHELL, TERM and USER only (no
 * CORRAL_STATE_DIR, XDG_STATE_HOME or XDG_RUNTIME_DIR). HOME is a temporary
 * one, so nothing is written into the real home. Then `corral` from an
 * ordinary shell of the same user finds the server and its shells.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { DEFAULT_INHERITED_ENV_VARS, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { inPidNamespace, taggedProcesses } from "../packages/tools/test/helpers.js"
import { corralBin, eventually } from "./fixtures/mcpHarness.js"
import { decodeListing } from "./fixtures/surfaceProcesses.js"

/** A fresh HOME for the scope, removed after it. */
const tempHome = Effect.acquireRelease(
  Effect.sync(() => fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-home-")))),
  (home) => Effect.sync(() => fs.rmSync(home, { recursive: true, force: true }))
)

/** `fn` with this process's HOME set to `home`: the SDK copies it into the server's environment as it spawns it. */
const withHome = async <A>(home: string, fn: () => Promise<A>): Promise<A> => {
  const saved = process.env.HOME
  process.env.HOME = home
  try {
    return await fn()
  } finally {
    process.env.HOME = saved
  }
}

const environOf = (pid: number): Map<string, string> =>
  new Map(fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter((e) => e !== "").map((e) => {
    const at = e.indexOf("=")
    return [e.slice(0, at), e.slice(at + 1)] as const
  }))

/** A user's own shell: their whole environment and this HOME, with no corral setting, and maybe an XDG_STATE_HOME. */
const ordinaryShellEnv = (home: string, xdgStateHome?: string) => {
  const env: Record<string, string | undefined> = { ...process.env, HOME: home, XDG_RUNTIME_DIR: `/run/user/${process.getuid?.() ?? 0}` }
  delete env.CORRAL_STATE_DIR
  delete env.XDG_STATE_HOME
  if (xdgStateHome !== undefined) env.XDG_STATE_HOME = xdgStateHome
  return env
}

const corralFrom = (home: string, args: ReadonlyArray<string>, xdgStateHome?: string) =>
  spawnSync(process.execPath, [corralBin, ...args], { encoding: "utf8", env: ordinaryShellEnv(home, xdgStateHome) })

describe.skipIf(!inPidNamespace)("corral mcp started by the MCP SDK's StdioClientTransport with no env, as Claude Code starts it (needs the PID namespace of npm test)", () => {
  it.scopedLive("keeps its state in ~/.local/state/corral, where corral ls, show and stop from the user's own shell find it and its shells", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      const transport = new StdioClientTransport({ command: process.execPath, args: [corralBin, "mcp", "--grace", "300ms"], stderr: "pipe" })
      let stderr = ""
      transport.stderr?.on("data", (bytes: Buffer) => (stderr += bytes.toString()))
      const client = new Client({ name: "claude-code", version: "2.0.0" })
      yield* Effect.acquireRelease(
        Effect.promise(() => withHome(home, () => client.connect(transport))),
        () => Effect.promise(() => client.close())
      )
      const pid = transport.pid!
      // what the server really got: the SDK's short list, HOME the temporary one
      const environ = environOf(pid)
      expect([...environ.keys()].every((key) => DEFAULT_INHERITED_ENV_VARS.includes(key)), [...environ.keys()].join(" ")).toBe(true)
      expect(environ.get("HOME")).toBe(home)

      const started = CallToolResultSchema.parse(yield* Effect.promise(() =>
        client.callTool({ name: "bash", arguments: { command: "echo serving from $HOME; sleep 30", run_in_background: true } })
      ))
      expect(started.isError, JSON.stringify(started)).toBeFalsy()
      const stateDir = path.join(home, ".local", "state", "corral")
      const socket = path.join(stateDir, "supervisors")
      yield* eventually("its journal and socket", () => fs.existsSync(socket) && fs.readdirSync(socket).length === 2)
      for (const dir of [path.join(home, ".local"), path.join(home, ".local", "state"), stateDir, socket]) {
        expect({ dir, mode: (fs.statSync(dir).mode & 0o777).toString(8) }).toEqual({ dir, mode: "700" })
      }

      // the user's own shell: no CORRAL_STATE_DIR, an XDG_RUNTIME_DIR, the same HOME
      yield* eventually("corral ls to list the shell", () => {
        const ls = corralFrom(home, ["ls", "--json"])
        return ls.status === 0 && decodeListing(ls.stdout).shells.length === 1
      })
      // and one whose profile sets XDG_STATE_HOME, which the server never saw
      const xdg = path.join(home, "xdg-state")
      for (const xdgStateHome of [undefined, xdg]) {
        const listing = decodeListing(corralFrom(home, ["ls", "--json"], xdgStateHome).stdout)
        expect(listing.supervisors.map((s) => [s.state, s.supervisor.pid, s.supervisor.name])).toEqual([["live", pid, "claude-code"]])
        expect(listing.shells.map((s) => [s.id, s.reach, s.info.command])).toEqual([[`${pid}:s1`, "live", "echo serving from $HOME; sleep 30"]])
        expect(corralFrom(home, ["show", `${pid}:s1`], xdgStateHome).stdout).toContain(`serving from ${home}`)
      }
      const stop = corralFrom(home, ["stop", `${pid}:s1`], xdg)
      expect({ status: stop.status, stderr: stop.stderr }).toEqual({ status: 0, stderr: "" })
      expect(taggedProcesses(`${pid}:`)).toEqual([])
      expect(stderr).not.toMatch(/warning|error/i)
    }))
})
