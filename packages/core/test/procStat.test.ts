import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ProcessTable } from "@corral/core"
import { isGone, parseStat } from "../dist/internal/procStat.js"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { waitFor } from "./helpers.js"

/** A full `/proc/<pid>/stat` line (52 fields) with the fields corral reads set. */
const statLine = (f: {
  pid: number
  comm: string
  state: string
  ppid: number
  pgid: number
  sid: number
  threads: number
  startTime: number
}) => {
  const after = Array.from({ length: 50 }, () => "0")
  after[0] = f.state
  after[1] = String(f.ppid)
  after[2] = String(f.pgid)
  after[3] = String(f.sid)
  after[17] = String(f.threads) // field 20
  after[19] = String(f.startTime) // field 22
  return `${f.pid} (${f.comm}) ${after.join(" ")}\n`
}

const base = { pid: 4242, comm: "sleep", state: "S", ppid: 4200, pgid: 4200, sid: 4100, threads: 1, startTime: 98765 }

describe("parseStat", () => {
  it("reads pid, name, state, parent, group, session, threads and start time", () => {
    expect(parseStat(statLine(base))).toEqual(base)
  })

  it("reads a real line of its own process", () => {
    const own = parseStat(fs.readFileSync("/proc/self/stat", "latin1"))
    expect(own).toMatchObject({ pid: process.pid, ppid: process.ppid, comm: expect.stringContaining("node") })
    expect(own!.startTime).toBeGreaterThan(0)
  })

  it("counts fields from the last `)`, so a name holding `) Z 1 1 ` fools nothing", () => {
    const line = statLine({ ...base, comm: "a) Z 1 1 b" })
    expect(parseStat(line)).toEqual({ ...base, comm: "a) Z 1 1 b" })
  })

  it("keeps a name made of parentheses and spaces", () => {
    expect(parseStat(statLine({ ...base, comm: ") (x) ( " }))?.comm).toBe(") (x) ( ")
  })

  it("rejects lines that are not stat lines", () => {
    expect(parseStat("")).toBeUndefined()
    expect(parseStat("4242 sleep S 1 1 1")).toBeUndefined()
    expect(parseStat("4242 (sleep) S 1 1 1")).toBeUndefined()
  })
})

describe("isGone", () => {
  const info = (state: string, threads: number) => parseStat(statLine({ ...base, state, threads }))!

  it("counts running, sleeping, stopped and uninterruptible processes alive", () => {
    for (const state of ["R", "S", "D", "T", "t", "I"]) expect(isGone(info(state, 1))).toBe(false)
  })

  it("counts a single-threaded zombie gone", () => {
    expect(isGone(info("Z", 1))).toBe(true)
  })

  it("counts a zombie whose other threads still run alive", () => {
    expect(isGone(info("Z", 2))).toBe(false)
  })

  it("counts a dead (X) process gone", () => {
    expect(isGone(info("X", 1))).toBe(true)
  })
})

describe("ProcessTable.layerLinux on a binary named `a) Z 1 1 b`", () => {
  // The child is our own and is reaped by Node when it exits: nothing is orphaned.
  const startTrickyBinary = Effect.acquireRelease(
    Effect.sync(() => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-stat-"))
      const file = path.join(dir, "a) Z 1 1 b")
      fs.copyFileSync("/bin/sleep", file)
      fs.chmodSync(file, 0o755)
      const child = spawn(file, ["30"], { detached: true, stdio: "ignore" })
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      return { dir, child, exited }
    }),
    ({ child, dir, exited }: { dir: string; child: ChildProcess; exited: Promise<void> }) =>
      Effect.promise(() => {
        child.kill("SIGKILL")
        return exited
      }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))))
  )

  it.scopedLive("looks up the right state, parent and group", () =>
    Effect.gen(function*() {
      const { child } = yield* startTrickyBinary
      const pid = child.pid!
      const table = yield* Effect.provide(ProcessTable, ProcessTable.layerLinux)
      const info = yield* waitFor("the tricky binary to sleep", () => {
        const found = Effect.runSync(table.lookup(pid))
        return Option.isSome(found) && found.value.state === "S" ? found.value : undefined
      })
      expect(info).toMatchObject({ pid, comm: "a) Z 1 1 b", state: "S", ppid: process.pid, pgid: pid, sid: pid, threads: 1 })
      expect(isGone(info)).toBe(false)
      expect(info.startTime).toBeLessThanOrEqual(yield* table.now)
    }))
})
