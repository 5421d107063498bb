/**
 * The state directory end to end, where every file is untrusted: the built
 * `corral` bin against malformed journals, another user's directory, a
 * read-only directory or HOME, and supervisors of different PID namespaces
 * sharing one directory.
 */
import { spawn } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import {
  canMakeReadOnly,
  isRoot,
  otherUid,
  ownPidNamespace,
  readOnly,
  readOnlyReason
} from "../packages/core/test/fixtures/stateDir.js"
import { eventually, mcpServer } from "./fixtures/mcpHarness.js"
import type { Announcement } from "./fixtures/surfaceProcesses.js"
import { corral, decodeAnnouncement, decodeListing, stateDir } from "./fixtures/surfaceProcesses.js"

const supervisors = (dir: string) => path.join(dir, "supervisors")

/** Writes `text` under a journal's name in `dir`, as anything in the directory could. */
const plant = (dir: string, name: string, text: string) => {
  fs.mkdirSync(supervisors(dir), { recursive: true, mode: 0o700 })
  const file = path.join(supervisors(dir), name)
  fs.writeFileSync(file, text, { mode: 0o600 })
  return file
}

/** A truncated journal, and one of the version before names carried the PID namespace. */
const plantMalformed = (dir: string) => [
  plant(dir, `${ownPidNamespace}-4242.json`, `{"version":2,"supervisor":{"pid":4242,"sta`),
  plant(dir, "4243.json", JSON.stringify({ version: 1, supervisor: { pid: 4243 } }))
]

describe("malformed journals", () => {
  it.scopedLive("corral ls skips them, says so once on stderr, and keeps --json clean", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const [truncated, older] = plantMalformed(dir)
      const first = yield* corral(dir, ["ls", "--json"])
      expect(first.code).toBe(0)
      expect(JSON.parse(first.stdout)).toEqual({ supervisors: [], shells: [] })
      const warnings = first.stderr.trimEnd().split("\n")
      expect(warnings).toHaveLength(2)
      expect(warnings).toContain(`corral: warning: ignored ${older}: its name is not <pid namespace>-<pid>.json; moved it to ${path.basename(older!)}.bad`)
      // the parser's own words differ between Node versions
      expect(warnings.find((w) => w.includes(truncated!))).toMatch(
        new RegExp(`^corral: warning: ignored ${truncated}: it is not JSON: .+; moved it to ${path.basename(truncated!)}\\.bad$`)
      )
      const second = yield* corral(dir, ["ls"])
      expect(second).toEqual({ code: 0, stdout: "no background shells\n", stderr: "" })
    }))

  it.scopedLive("corral mcp starts and serves despite them", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      plantMalformed(dir)
      const server = yield* mcpServer([], { CORRAL_STATE_DIR: dir })
      const listed = yield* server.call("list_shells", {})
      expect(listed.isError).toBe(false)
      expect(server.stderr()).toContain("ignored")
    }))
})

describe.skipIf(!isRoot)("a state directory of another user (as root: only root can give a directory away)", () => {
  it.scopedLive("corral ls refuses it, naming it, its owner and CORRAL_STATE_DIR", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      fs.chownSync(dir, otherUid, otherUid)
      const refused = yield* corral(dir, ["ls"])
      expect(refused).toEqual({
        code: 1,
        stdout: "",
        stderr: `corral: cannot use the state directory ${dir}: it belongs to uid ${otherUid}, not to you (uid 0). ` +
          "Set CORRAL_STATE_DIR to a writable directory of your own\n"
      })
    }))
})

describe.skipIf(!canMakeReadOnly)(`corral mcp where nothing can be written ${readOnlyReason}`, () => {
  /** Serves a background shell, then, killed outright, leaves its watcher to stop it. */
  const servesWithoutJournal = (env: Record<string, string | undefined>, named: string) =>
    Effect.gen(function*() {
      const server = yield* mcpServer(["--grace", "300ms"], env)
      const started = yield* server.call("bash", { command: "sleep 30 & wait", run_in_background: true })
      expect(started.isError).toBe(false)
      yield* eventually("the shell's sleep to run", () => server.sleeping() === 1)
      const warning = server.stderr().split("\n").find((l) => l.includes("cannot use the state directory"))
      expect(warning).toContain(`cannot use the state directory ${named}: `)
      expect(warning).toContain("Set CORRAL_STATE_DIR to a writable directory of your own. ")
      expect(warning).toContain("corral mcp runs without a journal or control socket: corral ls cannot see its shells")
      server.signal("SIGKILL")
      expect(yield* server.exited).toEqual({ code: null, signal: "SIGKILL" })
      yield* eventually("the watcher to stop the shells", () => server.leftovers().length === 0)
    })

  it.scopedLive("a read-only state directory: it starts without journal and socket, says so, and its watcher still stops the shells", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      yield* readOnly(dir)
      yield* servesWithoutJournal({ CORRAL_STATE_DIR: dir }, dir)
      expect(fs.readdirSync(dir)).toEqual([])
    }))

  it.scopedLive("an unwritable HOME: the same, naming ~/.local/state/corral", () =>
    Effect.gen(function*() {
      const home = yield* stateDir
      yield* readOnly(home)
      yield* servesWithoutJournal(
        { HOME: home, CORRAL_STATE_DIR: undefined, XDG_STATE_HOME: undefined },
        path.join(home, ".local", "state", "corral")
      )
    }))
})

const supervisorScript = fileURLToPath(new URL("./fixtures/surface-supervisor.mjs", import.meta.url))

/**
 * A surface supervisor as PID 1 of a PID namespace of its own, in the state
 * directory `dir`. Closing its stdin shuts it down cleanly; the scope kills
 * it (and its namespace) if it still runs.
 */
const namespacedSupervisor = (dir: string, name: string) =>
  Effect.gen(function*() {
    const child: ChildProcessWithoutNullStreams = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn("unshare", ["--pid", "--fork", "--mount-proc", "--kill-child", process.execPath, supervisorScript, name, "sleep 60"], {
          stdio: "pipe",
          env: { ...process.env, CORRAL_STATE_DIR: dir, CORRAL_GRACE: "300ms" }
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    const ready = yield* Deferred.make<typeof Announcement.Type>()
    let out = ""
    let err = ""
    child.stdout.on("data", (bytes: Buffer) => {
      out += bytes.toString()
      const line = /^READY (.*)$/m.exec(out)
      if (line !== null) Deferred.unsafeDone(ready, decodeAnnouncement(line[1]!))
    })
    child.stderr.on("data", (bytes: Buffer) => (err += bytes.toString()))
    child.once("exit", (code) => Deferred.unsafeDone(ready, Effect.dieMessage(`supervisor ${name} exited (${code}): ${err}`)))
    const announced = yield* Deferred.await(ready).pipe(Effect.timeout("20 seconds"))
    const exited = Effect.async<void>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
    })
    return { ...announced, stop: Effect.zipRight(Effect.sync(() => child.stdin.end()), exited) }
  })

/** `corral ls --json` as data. */
const listed = (dir: string) =>
  Effect.map(corral(dir, ["ls", "--json"]), (done) => {
    expect(done.code).toBe(0)
    return decodeListing(done.stdout)
  })

describe.skipIf(!isRoot)("supervisors of different PID namespaces in one state directory (as root: unshare --pid)", () => {
  it.scopedLive("both PID 1, they keep journals and sockets of their own; one leaving removes only its own", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* namespacedSupervisor(dir, "agent-a")
      const b = yield* namespacedSupervisor(dir, "agent-b")
      expect([a.pid, b.pid]).toEqual([1, 1])
      expect(a.socket).not.toBe(b.socket)
      const names = [a, b].map((s) => path.basename(s.socket, ".sock"))
      for (const name of names) expect(name).toMatch(/^[1-9][0-9]*-1$/)
      // READY comes when the starts return; each journal is written a few macrotasks after (ADR 18, 27), through
      // a temporary file renamed into place: wait for the journals themselves, not for as many names
      const files = names.flatMap((n) => [`${n}.json`, `${n}.sock`]).sort()
      yield* eventually("both journals", () => files.every((file) => fs.readdirSync(supervisors(dir)).includes(file)))
      expect(fs.readdirSync(supervisors(dir)).sort()).toEqual(files)

      const both = yield* listed(dir)
      expect(both.supervisors.map((s) => [s.socket, s.state]).sort()).toEqual([[a.socket, "live"], [b.socket, "live"]].sort())
      expect(both.shells.map((s) => [s.id, s.reach])).toEqual([["1:s1", "live"], ["1:s1", "live"]])

      yield* b.stop
      expect(fs.readdirSync(supervisors(dir)).sort()).toEqual([`${names[0]}.json`, `${names[0]}.sock`])
      const left = yield* listed(dir)
      expect(left.supervisors.map((s) => [s.socket, s.state])).toEqual([[a.socket, "live"]])
      yield* a.stop
      expect(fs.readdirSync(supervisors(dir))).toEqual([])
    }))
})
