/**
 * ProcessGroup with real processes: spawning, exit status, output, errors.
 * Every command here is a single process or a shell that waits for its
 * children, so nothing is orphaned and these run outside a PID namespace too.
 * The stop scenarios, which orphan on purpose, are in ProcessGroup.stop.test.ts.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { LimitsShape } from "@corral/core"
import { Limits, ProcessGroup, ProcessTable } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import { startTimeOf } from "./fixtures/registry/harness.js"
import { environOf, groupContainment, kernelProcess, leftovers, waitFor } from "./helpers.js"

const withLimits = (limits: Partial<LimitsShape> = {}) =>
  Effect.provide(groupContainment.pipe(Layer.provideMerge(Layer.mergeAll(ProcessTable.layer, Limits.layerWith({ grace: Duration.seconds(2), ...limits })))))

/** Waits until the pipes are closed and the buffer has ended. */
const outputComplete = (group: ProcessGroup.ProcessGroup) =>
  Effect.scoped(Effect.flatMap(group.output.live, Stream.runDrain))

const textOf = (group: ProcessGroup.ProcessGroup) => Effect.map(group.output.readSince(0), (r) => r.text)

describe("ProcessGroup.spawn", () => {
  it.live("starts the command as leader of a new session and group, tagged with its shell id", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: ["sleep", "30"] })
      const leader = yield* waitFor("the leader", () => kernelProcess(group.pid))
      expect(leader).toMatchObject({ pgid: group.pid, sid: group.pid, ppid: process.pid })
      expect(group.shellId).toMatch(/^corral-[0-9a-f]{12}$/)
      expect(environOf(group.pid).get("CORRAL_SHELL_ID")).toBe(group.shellId)
      expect(group.target).toMatchObject({ pgid: group.pid, sid: group.pid, shellId: group.shellId })
      expect(group.target.startTime).toBeLessThanOrEqual((yield* group.leaderStartTime)!)
      expect(yield* group.exitStatus).toEqual(Option.none())
    }).pipe(Effect.scoped, withLimits()))

  it.live("reads the leader's start time only while the leader is its unreaped child, and keeps the answer", () =>
    Effect.gen(function*() {
      // asked while the leader runs: its /proc start time, the same answer once it is reaped
      const asked = yield* ProcessGroup.spawn({ command: ["sleep", "0.2"] })
      const startTime = startTimeOf(asked.pid)
      expect(yield* asked.leaderStartTime).toBe(startTime)
      yield* asked.awaitExit
      expect(yield* asked.leaderStartTime).toBe(startTime)
      // first asked once the leader is reaped: its pid may be another process's by then, so no answer, save
      // under procScan, which reads it at the spawn for its membership (`StopTarget.leaderStartTime`)
      const late = yield* ProcessGroup.spawn({ command: ["true"] })
      yield* late.awaitExit
      expect(kernelProcess(late.pid)).toBeUndefined()
      if (late.containment === "procScan") {
        expect(yield* late.leaderStartTime).toBeTypeOf("number")
        expect(yield* late.leaderStartTime).toBe(late.target.leaderStartTime)
      } else {
        expect(yield* late.leaderStartTime).toBeUndefined()
      }
    }).pipe(Effect.scoped, withLimits()))

  it.live("runs a command line with the given shell, cwd and environment", () =>
    Effect.gen(function*() {
      const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-cwd-")))
      const group = yield* ProcessGroup.spawn({
        command: "echo \"$PWD|$GREETING|${BASH_VERSION:+bash}|$CORRAL_SHELL_ID\"",
        shell: "/bin/bash",
        cwd: dir,
        env: { GREETING: "hello" },
        shellId: "corral-given"
      })
      yield* group.awaitExit
      yield* outputComplete(group)
      expect(yield* textOf(group)).toBe(`${dir}|hello|bash|corral-given\n`)
      fs.rmSync(dir, { recursive: true })
    }).pipe(Effect.scoped, withLimits()))

  it.live("the environment is ours as it is at each spawn, the caller's over it; a variable the caller leaves undefined is unset", () =>
    Effect.gen(function*() {
      const ours = { CORRAL_TEST_OURS: "ours", CORRAL_TEST_OVERRIDDEN: "ours", CORRAL_TEST_UNSET: "ours" }
      yield* Effect.addFinalizer(() => Effect.sync(() => Object.keys(ours).forEach((name) => delete process.env[name])))
      const environOfSleeper = Effect.gen(function*() {
        const group = yield* ProcessGroup.spawn({
          command: ["sleep", "30"],
          env: { CORRAL_TEST_OVERRIDDEN: "caller", CORRAL_TEST_UNSET: undefined }
        })
        // the cgroup backend's sh wrapper execs sleep: its environment is read once sleep runs
        yield* waitFor("the command", () => kernelProcess(group.pid)?.comm === "sleep" || undefined)
        // what corral adds (its tags) and the wrapper's sh sets (PWD) aside
        return Object.fromEntries([...environOf(group.pid)].filter(([name]) => !name.startsWith("CORRAL_SHELL_ID") && name !== "PWD"))
      })
      // A spawn first, then variables set on process.env. An environment that inherits process.env by
      // prototype instead of copying it (a start's copy costs 100 µs and 8 KiB) passes the first spawn's
      // variables to every later one: V8 caches a for...in's keys, and Node's spawn lists them so
      yield* environOfSleeper
      Object.assign(process.env, ours)
      const expected = Object.fromEntries(
        Object.entries({ ...process.env, CORRAL_TEST_OVERRIDDEN: "caller" }).filter(([name]) => name !== "CORRAL_TEST_UNSET" && name !== "PWD")
      )
      expect(yield* environOfSleeper).toEqual(expected)
      process.env.CORRAL_TEST_OURS = "changed"
      expect(yield* environOfSleeper).toEqual({ ...expected, CORRAL_TEST_OURS: "changed" })
    }).pipe(Effect.scoped, withLimits()))

  it.live("does not let the caller's environment override the shell id", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: "echo $CORRAL_SHELL_ID", env: { CORRAL_SHELL_ID: "forged" } })
      yield* group.awaitExit
      yield* outputComplete(group)
      expect(yield* textOf(group)).toBe(`${group.shellId}\n`)
    }).pipe(Effect.scoped, withLimits()))
})

describe("ProcessGroup exit status", () => {
  it.live("reports the exit code", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: "exit 7" })
      expect(yield* group.awaitExit).toEqual({ _tag: "Exited", code: 7 })
      expect(yield* group.exitStatus).toEqual(Option.some({ _tag: "Exited", code: 7 }))
    }).pipe(Effect.scoped, withLimits()))

  it.live("reports the signal's name when the leader is killed", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: "kill -s KILL $$" })
      expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGKILL" })
    }).pipe(Effect.scoped, withLimits()))

  it.live("reports SIGTERM for a leader that a stop ended", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: ["sleep", "30"] })
      const report = yield* group.stop()
      expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGTERM" })
      expect(report).toMatchObject({ pgid: group.pid, members: 1, escalated: false, survivors: [], escaped: [] })
      expect(leftovers(group)).toEqual([])
    }).pipe(Effect.scoped, withLimits()))
})

describe("ProcessGroup output", () => {
  it.live("keeps stdout and stderr in arrival order, each chunk with its stream", () =>
    Effect.gen(function*() {
      // each line is written only once the test has seen the previous one,
      // so the order of arrival across the two pipes is known
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-order-"))
      const after = (n: number) => `while [ ! -e ${dir}/${n} ]; do sleep 0.01; done`
      const group = yield* ProcessGroup.spawn({
        command: `echo out1; ${after(1)}; echo err1 >&2; ${after(2)}; echo out2; ${after(3)}; echo err2 >&2`
      })
      for (const [n, line] of ["out1", "err1", "out2"].entries()) {
        yield* waitFor(line, () => Effect.runSync(textOf(group)).includes(line) || undefined)
        fs.writeFileSync(path.join(dir, String(n + 1)), "")
      }
      yield* group.awaitExit
      yield* outputComplete(group)
      fs.rmSync(dir, { recursive: true })
      const chunks = yield* group.output.chunks
      expect(chunks.map((c) => [c.stream, Buffer.from(c.bytes).toString()])).toEqual([
        ["stdout", "out1\n"],
        ["stderr", "err1\n"],
        ["stdout", "out2\n"],
        ["stderr", "err2\n"]
      ])
      expect(yield* textOf(group)).toBe("out1\nerr1\nout2\nerr2\n")
    }).pipe(Effect.scoped, withLimits()))

  it.live("the output ends when every holder has closed its pipes, not at the leader's exit: a command that closes them and runs on", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: "echo last words; echo on stderr >&2; exec >&- 2>&-; sleep 30" })
      // ends though the leader runs on: a live reader's stream, and the buffer's end
      yield* outputComplete(group).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error("the output did not end") }))
      expect(yield* group.exitStatus).toEqual(Option.none())
      expect(leftovers(group).length, "the command's processes").toBeGreaterThan(0)
      expect(yield* textOf(group)).toBe("last words\non stderr\n")
      const report = yield* group.stop()
      expect(report).toMatchObject({ escalated: false, survivors: [] })
    }).pipe(Effect.scoped, withLimits()))

  it.live("the output does not end while any holder keeps a pipe open: the leader closing its own is not the end", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: "echo from the leader; (sleep 0.5; echo from the child) & exec >&- 2>&-; wait" })
      yield* outputComplete(group)
      expect(yield* textOf(group)).toBe("from the leader\nfrom the child\n")
      expect(yield* group.awaitExit).toEqual({ _tag: "Exited", code: 0 })
    }).pipe(Effect.scoped, withLimits()))

  it.live("drains a command writing 5 MB as it runs, keeping only the last bufferBytes", () =>
    Effect.gen(function*() {
      const lines = 800_000
      let size = 0
      for (let n = 1; n <= lines; n++) size += String(n).length + 1
      const group = yield* ProcessGroup.spawn({ command: ["seq", "1", String(lines)] })
      // a pipe nobody reads fills at 64 KiB and blocks the writer forever
      expect(yield* group.awaitExit.pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => "seq blocked" })))
        .toEqual({ _tag: "Exited", code: 0 })
      yield* outputComplete(group)
      const stats = yield* group.output.stats
      expect(stats.written).toBe(size)
      expect(stats.written - stats.dropped).toBeLessThanOrEqual(64 * 1024)
      const read = yield* group.output.readSince(0)
      expect(read.dropped).toBe(stats.dropped)
      expect(read.text.length).toBeGreaterThan(60 * 1024)
      expect(read.text.endsWith("799999\n800000\n")).toBe(true)
      expect((yield* group.output.tail(2)).text).toBe("799999\n800000\n")
    }).pipe(Effect.scoped, withLimits({ bufferBytes: 64 * 1024 })))
})

describe("ProcessGroup stop calls", () => {
  it.live("concurrent and repeated stops share the first stop's report", () =>
    Effect.gen(function*() {
      const group = yield* ProcessGroup.spawn({ command: ["sleep", "30"] })
      expect(yield* group.stopReport).toEqual(Option.none())
      const [a, b] = yield* Effect.all([group.stop(), group.stop()], { concurrency: 2 })
      expect(a).toBe(b)
      expect(yield* group.stop()).toBe(a)
      expect(yield* group.stopReport).toEqual(Option.some(a))
      expect(a.signals.SIGTERM).toBe(1)
    }).pipe(Effect.scoped, withLimits()))

  it.live("stopAll stops several groups together", () =>
    Effect.gen(function*() {
      const groups = yield* Effect.all([1, 2, 3].map(() => ProcessGroup.spawn({ command: ["sleep", "30"] })))
      const reports = yield* ProcessGroup.stopAll(groups)
      expect(reports.map((r) => r.pgid)).toEqual(groups.map((g) => g.pid))
      for (const group of groups) {
        expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGTERM" })
        expect(leftovers(group)).toEqual([])
      }
    }).pipe(Effect.scoped, withLimits()))

  // under the TestClock no pause runs out: the stop must end on the groups' own events, as a stop of one group does
  it.effect("stopAll ends on its groups' exits and closed pipes, not at the end of a pause", () =>
    Effect.gen(function*() {
      // each takes a moment to end once signalled, so the stop has to pause at least once
      const slow = "trap 'sleep 0.2; exit 0' TERM; sleep 30 & wait"
      const groups = yield* Effect.all([1, 2].map(() => ProcessGroup.spawn({ command: slow })))
      yield* TestServices.provideLive(Effect.forEach(groups, (g) => waitFor("the shell's sleep", () => leftovers(g).length >= 2 || undefined)))
      const reports = yield* ProcessGroup.stopAll(groups)
      expect(reports.map((r) => [r.escalated, r.survivors])).toEqual([[false, []], [false, []]])
      for (const group of groups) {
        expect(yield* group.awaitExit).toEqual({ _tag: "Exited", code: 0 })
        expect(leftovers(group)).toEqual([])
      }
    }).pipe(Effect.scoped, withLimits()), 10_000)

  it.live("closing the scope stops a running group", () =>
    Effect.gen(function*() {
      const group = yield* Effect.scoped(ProcessGroup.spawn({ command: ["sleep", "30"] }))
      expect(yield* group.stopReport).toMatchObject(Option.some({ members: 1, escalated: false }))
      expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGTERM" })
      expect(leftovers(group)).toEqual([])
    }).pipe(withLimits()))
})

describe("ProcessGroup bad input", () => {
  /** The spawn's error; a spawn that succeeds fails the test. */
  const failure = (spec: ProcessGroup.SpawnSpec) => ProcessGroup.spawn(spec).pipe(Effect.scoped, Effect.flip, withLimits())

  it.live("refuses an empty or blank command", () =>
    Effect.gen(function*() {
      for (const command of ["", "   \t\n", [], [""], ["  "]]) {
        const error = yield* failure({ command })
        expect(error).toBeInstanceOf(ProcessGroup.EmptyCommand)
        expect(error.message).toMatch(/command is empty.*pass the command line to run/)
      }
    }))

  it.live("refuses a NUL byte, naming the command and the fix", () =>
    Effect.gen(function*() {
      const cases = [["echo a\0b", "echo a\0b"], [["echo", "a\0b"], "a\0b"]] as const
      for (const [command, named] of cases) {
        const error = yield* failure({ command })
        expect(error).toBeInstanceOf(ProcessGroup.InvalidCommand)
        expect(error).toMatchObject({ command: named })
        expect(error.message).toContain(JSON.stringify(named))
        expect(error.message).toMatch(/NUL byte.*remove it/)
      }
    }))

  it.live("refuses a missing working directory, naming it", () =>
    Effect.gen(function*() {
      const cwd = path.join(os.tmpdir(), "corral-no-such-dir", "deeper")
      const error = yield* failure({ command: "true", cwd })
      expect(error).toBeInstanceOf(ProcessGroup.InvalidCwd)
      expect(error).toMatchObject({ cwd, reason: "missing" })
      expect(error.message).toContain(cwd)
      expect(error.message).toMatch(/does not exist: create it or pass an existing directory/)
    }))

  it.live("refuses a working directory that is a file, naming it", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-cwd-"))
      const cwd = path.join(dir, "a-file")
      fs.writeFileSync(cwd, "")
      const error = yield* failure({ command: "true", cwd })
      fs.rmSync(dir, { recursive: true })
      expect(error).toMatchObject({ _tag: "InvalidCwd", cwd, reason: "not-a-directory" })
      expect(error.message).toContain(cwd)
      expect(error.message).toMatch(/not a directory: pass a directory/)
    }))

  it.live("fails with ENOENT for a missing executable, naming it", () =>
    Effect.gen(function*() {
      const error = yield* failure({ command: ["corral-no-such-program", "--flag"] })
      expect(error).toBeInstanceOf(ProcessGroup.SpawnError)
      expect(error).toMatchObject({ file: "corral-no-such-program", code: "ENOENT" })
      expect(error.message).toBe("cannot run corral-no-such-program: not found: check the name and PATH")
    }))

  it.live("fails with EACCES for a file that is not executable, naming it", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-exec-"))
      const file = path.join(dir, "script.sh")
      fs.writeFileSync(file, "#!/bin/sh\necho hi\n", { mode: 0o644 })
      const error = yield* failure({ command: [file] })
      fs.rmSync(dir, { recursive: true })
      expect(error).toMatchObject({ _tag: "SpawnError", file, code: "EACCES" })
      expect(error.message).toBe(`cannot run ${file}: permission denied: check that it is executable`)
    }))

  it.live("fails as exec would for a command found at an earlier start, then made non-executable, then removed", () =>
    Effect.gen(function*() {
      // where a wrapper execs the command, a start remembers where it found it (internal/executable): checked again each time
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-path-"))
      const name = "corral-found-once"
      fs.writeFileSync(path.join(dir, name), "#!/bin/sh\nexit 0\n", { mode: 0o755 })
      const env = { PATH: `${dir}:/usr/bin:/bin` }
      const ran = yield* ProcessGroup.spawn({ command: [name], env }).pipe(
        Effect.flatMap((group) => group.awaitExit),
        Effect.scoped,
        withLimits()
      )
      expect(ran).toEqual({ _tag: "Exited", code: 0 })
      fs.chmodSync(path.join(dir, name), 0o644)
      expect(yield* failure({ command: [name], env })).toMatchObject({ _tag: "SpawnError", file: name, code: "EACCES" })
      fs.rmSync(path.join(dir, name))
      expect(yield* failure({ command: [name], env })).toMatchObject({ _tag: "SpawnError", file: name, code: "ENOENT" })
      fs.rmSync(dir, { recursive: true })
    }))

  it.live("fails with ENOENT for a shell that does not exist", () =>
    Effect.gen(function*() {
      const error = yield* failure({ command: "echo hi", shell: "/nonexistent/sh" })
      expect(error).toMatchObject({ _tag: "SpawnError", file: "/nonexistent/sh", code: "ENOENT" })
      expect(error.message).toContain("/nonexistent/sh")
    }))
})
