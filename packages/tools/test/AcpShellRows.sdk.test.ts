/**
 * The rows are the Agent Client Protocol SDK's own types: every update
 * corral makes is assignable to `@agentclientprotocol/sdk`'s `SessionUpdate`
 * (checked by tsc, which `npm test` runs first), and a host can hand them to
 * `sessionUpdate` as they are.
 */
import type * as Acp from "@agentclientprotocol/sdk"
import type { ShellInfo } from "@corral/core/ShellRegistry"
import * as AcpShellRows from "@corral/tools/AcpShellRows"
import { describe, expect, it } from "@effect/vitest"

const asSdk = (update: AcpShellRows.SessionUpdate): Acp.SessionUpdate => update
const notification = (update: AcpShellRows.SessionUpdate): Acp.SessionNotification => ({ sessionId: "session-1", update })

const info = (status: ShellInfo["status"]): ShellInfo => ({
  id: "s1",
  tag: "42:s1",
  command: "npm run dev",
  cwd: "/app",
  owner: "agent",
  pid: 42,
  startedAt: 0,
  status
})

describe("AcpShellRows against @agentclientprotocol/sdk 2.4", () => {
  it("a row's creation, output and end are SDK session updates", () => {
    const updates = [
      AcpShellRows.started(info({ _tag: "Running" }), "compiling\n"),
      AcpShellRows.outputUpdate("s1", "compiling\nready\n"),
      AcpShellRows.ended(info({ _tag: "Killed", signal: "SIGTERM", by: "shutdown" }), "compiling\nready\n")
    ].map(asSdk)
    expect(updates.map((u) => u.sessionUpdate)).toEqual(["tool_call", "tool_call_update", "tool_call_update"])
    expect(notification(updates[2] as AcpShellRows.SessionUpdate).update).toMatchObject({ toolCallId: "shell:s1", status: "completed" })
  })
})
