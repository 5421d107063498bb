import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ProcessInfo } from "@corral/core"
import { groupMembers, makeTestScript, OwnProcess, ProcessTable, sessionMembers } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { fakeProcess, kernelProcess, kernelProcesses, waitFor } from "./helpers.js"

const tableOf = (layer: typeof ProcessTable.layerLinux) => Effect.provide(ProcessTable, layer)

/**
 * `sh -c 'sleep 30; exit 0'` in a new session: two members. Cleanup kills
 * the sleep first, so the shell reaps it and exits, and Node reaps the
 * shell: nothing is orphaned.
 */
const twoMemberGroup = Effect.acquireRelease(
  Effect.gen(function*() {
    const leader = spawn("/bin/sh", ["-c", "sleep 30; exit 0"], { detached: true, stdio: "ignore" })
    const exited = new Promise<void>((resolve) => leader.once("exit", () => resolve()))
    const pid = leader.pid!
    const child = yield* waitFor("the shell's sleep", () =>
      kernelProcesses().find((p) => p.ppid === pid && p.comm === "sleep" && p.state === "S"))
    return { pid, childPid: child.pid, exited }
  }),
  ({ childPid, exited, pid }) =>
    Effect.promise(() => {
      process.kill(childPid, "SIGKILL")
      return Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2_000))])
    }).pipe(Effect.zipRight(Effect.sync(() => {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone, as expected
      }
    })))
)

const identity = ({ comm, pgid, pid, ppid, sid }: ProcessInfo) => ({ pid, ppid, pgid, sid, comm })

describe("ProcessTable on a real group", () => {
  it.scopedLive("layerLinux and layerPs see the same members, groups and session", () =>
    Effect.gen(function*() {
      const group = yield* twoMemberGroup
      const linux = yield* tableOf(ProcessTable.layerLinux)
      const ps = yield* tableOf(ProcessTable.layerPs)
      const fromLinux = sessionMembers(yield* linux.scan, group.pid).map(identity)
      const fromPs = sessionMembers(yield* ps.scan, group.pid).map(identity)
      const expected = [
        { pid: group.pid, ppid: process.pid, pgid: group.pid, sid: group.pid, comm: "sh" },
        { pid: group.childPid, ppid: group.pid, pgid: group.pid, sid: group.pid, comm: "sleep" }
      ]
      const byPid = (a: { pid: number }, b: { pid: number }) => a.pid - b.pid
      expect(fromLinux.sort(byPid)).toEqual(expected)
      expect(fromPs.sort(byPid)).toEqual(expected)
      for (const table of [linux, ps]) {
        const member = yield* table.lookup(group.childPid)
        expect(Option.map(member, identity)).toEqual(Option.some(expected[1]))
      }
    }))

  it.scopedLive("both layers give start times on the scale of their own `now`", () =>
    Effect.gen(function*() {
      const group = yield* twoMemberGroup
      const ages = []
      for (const layer of [ProcessTable.layerLinux, ProcessTable.layerPs]) {
        const table = yield* tableOf(layer)
        const leader = Option.getOrThrow(yield* table.lookup(group.pid))
        ages.push((yield* table.now) - leader.startTime)
      }
      const [linuxAge, psAge] = ages as [number, number]
      // ps has one-second resolution and its `now` is taken a second early
      expect(linuxAge).toBeGreaterThanOrEqual(0)
      expect(Math.abs(linuxAge - psAge)).toBeLessThanOrEqual(200)
    }))

  it.scopedLive("groupMembers and sessionMembers find both members of a live group", () =>
    Effect.gen(function*() {
      const group = yield* twoMemberGroup
      const scan = yield* (yield* tableOf(ProcessTable.layer)).scan
      const pids = (ps: ReadonlyArray<ProcessInfo>) => ps.map((p) => p.pid).sort((a, b) => a - b)
      expect(pids(groupMembers(scan, group.pid))).toEqual([group.pid, group.childPid].sort((a, b) => a - b))
      expect(pids(sessionMembers(scan, group.pid))).toEqual(pids(groupMembers(scan, group.pid)))
    }))

  it.live("layerLinux reads the CORRAL_SHELL_ID a process carries, wherever it sits in the environment", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const cases: ReadonlyArray<[NodeJS.ProcessEnv, string | undefined]> = [
        [{ CORRAL_SHELL_ID: "corral-first", PATH: process.env.PATH }, "corral-first"],
        [{ ...process.env, CORRAL_SHELL_ID: "corral-last" }, "corral-last"],
        [{ PATH: process.env.PATH, NOT_CORRAL_SHELL_ID: "decoy" }, undefined],
        // a nested corral's process carries the outer ids too
        [{ PATH: process.env.PATH, CORRAL_SHELL_ID: "inner", CORRAL_SHELL_IDS: "outer,inner" }, "outer,inner"],
        [{ PATH: process.env.PATH, CORRAL_SHELL_ID: "inner", CORRAL_SHELL_IDS: "outer" }, "outer,inner"],
        // given no environment at all (`env -i`): it reads empty for good, and carries none
        [{}, undefined]
      ]
      for (const [env, expected] of cases) {
        // `read` keeps the shell alive until the test lets it go; Node reaps it
        const child = spawn("/bin/sh", ["-c", "read x"], { env, stdio: ["pipe", "ignore", "ignore"] })
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
        yield* waitFor("the shell", () => kernelProcesses().find((p) => p.pid === child.pid && p.comm === "sh"))
        const tags = yield* table.shellIdsOf(child.pid!)
        child.stdin!.end("\n")
        yield* Effect.promise(() => exited)
        expect(tags).toEqual(expected === undefined ? [] : expected.split(","))
      }
      expect(yield* table.shellIdsOf(process.pid)).toEqual([])
    }))
})

describe("ProcessTable.shellIdsOf in an exec", () => {
  it.live("a process reads as carrying its tag through each exec, when its environment reads empty for a moment", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-exec-"))
      const script = path.join(dir, "again.sh")
      fs.writeFileSync(script, "#!/bin/sh\n[ \"$1\" -gt 0 ] && exec \"$0\" $(($1 - 1))\nexec sleep 30\n", { mode: 0o700 })
      const child = spawn(script, ["300"], { env: { PATH: process.env.PATH, CORRAL_SHELL_ID: "corral-exec" }, stdio: "ignore" })
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      const read: Array<string> = []
      // before, about one read in six found the environment empty and the process carrying no tag
      while (kernelProcess(child.pid!)?.comm !== "sleep") read.push((yield* table.shellIdsOf(child.pid!)).join(","))
      child.kill("SIGKILL")
      yield* Effect.promise(() => exited)
      fs.rmSync(dir, { recursive: true })
      expect(read.length).toBeGreaterThan(100)
      expect(read.filter((ids) => ids !== "corral-exec")).toEqual([])
    }))
})

describe("ProcessTable.shellIdsOf, an environment given empty", () => {
  // the kernel walks a new environment with its end set at its start, so "empty" is
  // only believed of a process asleep or one that has run on since: a busy one too
  it.live("a process that runs without pause on no environment (`env -i`) reads as carrying none", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const child = spawn("/bin/sh", ["-c", "while :; do :; done"], { env: {}, stdio: "ignore" })
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      yield* waitFor("the busy shell", () => kernelProcesses().find((p) => p.pid === child.pid && p.comm === "sh" && p.state === "R"))
      const tags = yield* table.shellIdsOf(child.pid!)
      child.kill("SIGKILL")
      yield* Effect.promise(() => exited)
      expect(tags).toEqual([])
    }))
})

describe("ProcessTable.scanSince", () => {
  /** `count` sleeps, killed (and reaped by Node) when the scope closes. */
  const sleeps = (count: number) =>
    Effect.acquireRelease(
      Effect.sync(() => Array.from({ length: count }, () => spawn("sleep", ["30"], { stdio: "ignore" }))),
      (children) => Effect.sync(() => children.forEach((c) => c.kill("SIGKILL")))
    )

  it.scoped("skips the processes older than the mark, and reads every one born since", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const before = yield* sleeps(5)
      const mark = yield* table.mark
      expect(mark, "this machine's /proc gives a mark").toBeDefined()
      const after = yield* sleeps(3)
      yield* waitFor("the sleeps", () => kernelProcesses().filter((p) => p.comm === "sleep" && [...before, ...after].some((c) => c.pid === p.pid)).length === 8 || undefined)
      const since = new Set((yield* table.scanSince(mark!)).map((p) => p.pid))
      const all = new Set((yield* table.scan).map((p) => p.pid))
      expect({ before: before.filter((c) => since.has(c.pid!)).length, after: after.filter((c) => since.has(c.pid!)).length }).toEqual({ before: 0, after: 3 })
      expect([...before, ...after].every((c) => all.has(c.pid!))).toBe(true)
    }))

  it.scoped("reads every process when more tasks were forked since the mark than the pid cycle holds: pids may have come round", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const before = yield* sleeps(3)
      const mark = yield* table.mark
      const pidMax = Number(fs.readFileSync("/proc/sys/kernel/pid_max", "latin1"))
      // as if the mark were taken a whole pid cycle of forks ago
      const since = new Set((yield* table.scanSince({ ...mark!, forks: mark!.forks - pidMax })).map((p) => p.pid))
      expect(before.every((c) => since.has(c.pid!))).toBe(true)
    }))
})

describe("ProcessTable.uidOf", () => {
  it.scopedLive("layerLinux and layerPs read the same real uid, and none once the process is gone", () =>
    Effect.gen(function*() {
      const asRoot = process.getuid?.() === 0
      // as root, a child of another user too
      const expected = asRoot ? 65534 : process.getuid!()
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawn("sleep", ["30"], { stdio: "ignore", ...(asRoot ? { uid: 65534, gid: 65534 } : {}) })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      yield* waitFor("sleep to start", () => kernelProcesses().find((p) => p.pid === child.pid && p.comm === "sleep"))
      for (const layer of [ProcessTable.layerLinux, ProcessTable.layerPs]) {
        const table = yield* tableOf(layer)
        expect(yield* table.uidOf(child.pid!)).toEqual(Option.some(expected))
        expect(yield* table.uidOf(process.pid)).toEqual(Option.some(process.getuid!()))
      }
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      child.kill("SIGKILL")
      yield* Effect.promise(() => exited)
      for (const layer of [ProcessTable.layerLinux, ProcessTable.layerPs]) {
        expect(yield* (yield* tableOf(layer)).uidOf(child.pid!)).toEqual(Option.none())
      }
    }))
})

describe("ProcessTable.signal", () => {
  it.live("the real tables refuse pid <= 1, their own process and group, and non-integers", () =>
    Effect.gen(function*() {
      for (const layer of [ProcessTable.layerLinux, ProcessTable.layerPs]) {
        const table = yield* tableOf(layer)
        // SIGCONT: harmless even if a refusal were missing
        for (const target of [0, 1, -1, process.pid, -process.pid, Number.NaN, 2.5]) {
          expect(yield* table.signal(target, "SIGCONT"), `target ${target}`).toBe(false)
        }
      }
    }))

  it.scopedLive("the real tables never signal the group OwnProcess names: a layer gives it, so a test can", () =>
    Effect.gen(function*() {
      // a group of our own making stands for ours; killed at the end if a check failed first
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawn("sleep", ["30"], { detached: true, stdio: "ignore" })),
        (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
      )
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_, signal) => resolve(signal)))
      yield* waitFor("sleep to start", () => kernelProcesses().find((p) => p.pid === child.pid && p.comm === "sleep"))
      const ours = OwnProcess.layerWith({ pid: process.pid, pgid: child.pid! })
      for (const layer of [ProcessTable.layerLinuxWithoutDependencies, ProcessTable.layerPsWithoutDependencies]) {
        const table = yield* tableOf(Layer.provide(layer, ours))
        expect(yield* table.signal(-child.pid!, "SIGTERM")).toBe(false)
      }
      expect(kernelProcesses().some((p) => p.pid === child.pid && p.comm === "sleep")).toBe(true)
      // the same table guarding our real group signals it
      expect(yield* (yield* tableOf(ProcessTable.layerLinux)).signal(-child.pid!, "SIGTERM")).toBe(true)
      expect(yield* Effect.promise(() => exited)).toBe("SIGTERM")
    }))

  it.live("the real table reports whether the kernel accepted the signal", () =>
    Effect.gen(function*() {
      const table = yield* tableOf(ProcessTable.layerLinux)
      const child = spawn("sleep", ["30"], { stdio: "ignore" })
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_, signal) => resolve(signal)))
      yield* waitFor("sleep to start", () => kernelProcesses().find((p) => p.pid === child.pid && p.comm === "sleep"))
      expect(yield* table.signal(child.pid!, "SIGTERM")).toBe(true)
      expect(yield* Effect.promise(() => exited)).toBe("SIGTERM")
      // reaped by Node: the pid no longer exists
      expect(yield* table.signal(child.pid!, "SIGTERM")).toBe(false)
    }))
})

describe("ProcessTable.layerTest", () => {
  it.effect("serves the scripted table, tags and clock, and records accepted signals", () =>
    Effect.gen(function*() {
      const leader = fakeProcess(5000)
      const job = fakeProcess(5001, { pgid: 5001, sid: 5000 })
      const script = yield* makeTestScript([leader, job], { shellIds: new Map([[5000, "corral-a"]]) })
      const table = yield* Effect.provide(ProcessTable, ProcessTable.layerTest(script))
      expect(yield* table.scan).toEqual([leader, job])
      expect(yield* table.lookup(5001)).toEqual(Option.some(job))
      expect(yield* table.lookup(7)).toEqual(Option.none())
      expect(yield* table.shellIdsOf(5000)).toEqual(["corral-a"])
      // the test's own user, unless scripted
      expect(yield* table.uidOf(5000)).toEqual(Option.some(process.getuid!()))
      expect(yield* table.uidOf(7)).toEqual(Option.none())
      const other = yield* makeTestScript([leader], { uids: new Map([[5000, 65534]]) })
      expect(yield* Effect.flatMap(Effect.provide(ProcessTable, ProcessTable.layerTest(other)), (t) => t.uidOf(5000))).toEqual(Option.some(65534))
      yield* Ref.set(script.now, 1234)
      expect(yield* table.now).toBe(1234)
      expect(yield* table.signal(-5001, "SIGTERM")).toBe(true)
      expect(yield* table.signal(6000, "SIGKILL")).toBe(false)
      expect(yield* table.signal(1, "SIGKILL")).toBe(false)
      expect(yield* table.signal(-1, "SIGKILL")).toBe(false)
      expect(yield* table.signal(0, "SIGKILL")).toBe(false)
      expect(yield* Ref.get(script.signals)).toEqual([
        { target: -5001, signal: "SIGTERM" },
        { target: 6000, signal: "SIGKILL" }
      ])
    }))
})

describe("groupMembers and sessionMembers", () => {
  const leader = fakeProcess(5000)
  const worker = fakeProcess(5002, { pgid: 5000, sid: 5000 })
  const job = fakeProcess(5001, { pgid: 5001, sid: 5000 })
  const zombie = fakeProcess(5003, { pgid: 5000, sid: 5000, state: "Z" })
  const busyZombie = fakeProcess(5004, { pgid: 5000, sid: 5000, state: "Z", threads: 2 })
  const dead = fakeProcess(5005, { pgid: 5001, sid: 5000, state: "X" })
  const stranger = fakeProcess(6000)
  const table = [leader, worker, job, zombie, busyZombie, dead, stranger]

  it("groupMembers keeps the live members of one group, a zombie with live threads included", () => {
    expect(groupMembers(table, 5000)).toEqual([leader, worker, busyZombie])
  })

  it("sessionMembers also finds the session's other (job-control) groups", () => {
    expect(sessionMembers(table, 5000)).toEqual([leader, worker, job, busyZombie])
  })

  it("finds nothing for an unknown id", () => {
    expect(groupMembers(table, 4999)).toEqual([])
    expect(sessionMembers(table, 4999)).toEqual([])
  })
})
