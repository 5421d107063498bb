/**
 * Test helpers. The /proc reader here is deliberately independent of the
 * code under test: the real-process tests use it to check what the kernel
 * says is left, not what corral believes.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ProcessInfo, Signal, TestScript } from "@corral/core"
import { Containment, ProcessTable } from "@corral/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"

/**
 * True inside the PID namespace `npm test` creates. Tests that orphan
 * processes on purpose need it: on the machines corral is built on, PID 1
 * never reaps, so an orphan that dies outside a namespace stays a zombie
 * until reboot. Inside, they go when the namespace ends.
 */
export const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"

/**
 * The containment for tests of a process group's own shape (its members,
 * their count, zombies under a non-reaping PID 1): cgroup where one can be
 * made, else procScan with the command as its leader (`layerTest`, over the
 * table provided: the real one here). A PID namespace adds two wrapper
 * processes and an init that reaps, and procScan on Linux an init that
 * reaps; test/containment.test.ts covers both.
 */
export const groupContainment = Layer.catchAll(Containment.layerCgroup, () => Containment.layerTest)

// ---------------------------------------------------------------------------
// The kernel's view, read straight from /proc

export interface KernelProcess {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  readonly sid: number
  readonly state: string
  readonly threads: number
  readonly comm: string
}

const readText = (path: string): string | undefined => {
  try {
    return fs.readFileSync(path, "latin1")
  } catch {
    return undefined
  }
}

export const kernelProcess = (pid: number): KernelProcess | undefined => {
  const stat = readText(`/proc/${pid}/stat`)
  const status = readText(`/proc/${pid}/status`)
  if (stat === undefined || status === undefined) return undefined
  const nameEnd = stat.lastIndexOf(")")
  const [state, ppid, pgid, sid] = stat.slice(nameEnd + 2).split(" ")
  const threads = /^Threads:\s*(\d+)$/m.exec(status)
  return {
    pid,
    ppid: Number(ppid),
    pgid: Number(pgid),
    sid: Number(sid),
    state: state!,
    threads: threads === null ? 1 : Number(threads[1]),
    comm: stat.slice(stat.indexOf("(") + 1, nameEnd)
  }
}

export const kernelProcesses = (): Array<KernelProcess> =>
  fs.readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    const p = kernelProcess(Number(name))
    return p === undefined ? [] : [p]
  })

/** A zombie whose other threads still run is alive. */
export const isAlive = (p: KernelProcess) => !((p.state === "Z" || p.state === "X") && p.threads <= 1)

/** Whether `pid` names a live process: false once it is gone or a zombie. */
export const isPidAlive = (pid: number) => {
  const p = kernelProcess(pid)
  return p !== undefined && isAlive(p)
}

export const environOf = (pid: number): Map<string, string> => {
  const entries = (readText(`/proc/${pid}/environ`) ?? "").split("\0").flatMap((kv) => {
    const at = kv.indexOf("=")
    return at > 0 ? [[kv.slice(0, at), kv.slice(at + 1)] as const] : []
  })
  return new Map(entries)
}

/** Live processes of the group's session, or anywhere carrying its shell id. */
export const leftovers = (group: { readonly pid: number; readonly shellId: string }) =>
  kernelProcesses().filter((p) =>
    isAlive(p) && p.pid !== process.pid &&
    (p.sid === group.pid || environOf(p.pid).get("CORRAL_SHELL_ID") === group.shellId)
  )

export const sessionOf = (sid: number) => kernelProcesses().filter((p) => p.sid === sid)

/** A fresh directory under the system's temp dir, removed with the scope. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

// ---------------------------------------------------------------------------
// Waiting on the real world, with a bound

/** Where a process sleeps in the kernel (`/proc/<pid>/wchan`, `do_wait`, `hrtimer_nanosleep`); empty when gone. */
export const wchanOf = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/wchan`, "latin1")
  } catch {
    return ""
  }
}

/**
 * Polls `check` until it returns a value, failing after `timeoutMs`: long
 * enough for a busy host, inside the tests' own 30 s.
 */
export const waitFor = <A>(what: string, check: () => A | undefined, timeoutMs = 20_000) =>
  Effect.gen(function*() {
    const until = Date.now() + timeoutMs
    for (;;) {
      const found = check()
      if (found !== undefined) return found
      if (Date.now() > until) return yield* Effect.dieMessage(`timed out after ${timeoutMs} ms waiting for ${what}`)
      yield* Effect.sleep(20)
    }
  })

// ---------------------------------------------------------------------------
// Scripted process tables

/** A process for a scripted table: a sleeping group leader born at tick 10 unless told otherwise. */
export const fakeProcess = (pid: number, fields: Partial<ProcessInfo> = {}): ProcessInfo => ({
  pid,
  ppid: 1000,
  pgid: pid,
  sid: pid,
  state: "S",
  threads: 1,
  startTime: 10,
  comm: "sh",
  ...fields
})

/** Whether a signal sent to `target` (pid, or -pgid) reaches `p`. */
export const reaches = (target: number, p: ProcessInfo) => target < 0 ? p.pgid === -target : p.pid === target

/** Removes from the table every process a signal reaches. */
export const vanish = (script: TestScript, target: number) =>
  Ref.update(script.processes, (all) => all.filter((p) => !reaches(target, p)))

export interface SignalRequest {
  readonly target: number
  readonly signal: Signal
  /** Clock time of the request, in milliseconds. */
  readonly at: number
}

/**
 * `ProcessTable.layerTest`, counting scans and a stop's rechecks of single
 * processes, and recording every signal corral asks for, including the ones
 * the table refuses.
 */
export const instrumentedTable = (script: TestScript) =>
  Effect.gen(function*() {
    const scans = yield* Ref.make(0)
    const rechecks = yield* Ref.make(0)
    const requested = yield* Ref.make<ReadonlyArray<SignalRequest>>([])
    const inner = yield* Effect.provide(ProcessTable, ProcessTable.layerTest(script))
    const layer = Layer.succeed(ProcessTable, ProcessTable.of({
      ...inner,
      scan: Effect.zipRight(Ref.update(scans, (n) => n + 1), inner.scan),
      scanSince: (since) => Effect.zipRight(Ref.update(scans, (n) => n + 1), inner.scanSince(since)),
      keptLookups: Effect.map(inner.keptLookups, (kept) => ({
        ...kept,
        lookup: (pid: number) => Effect.zipRight(Ref.update(rechecks, (n) => n + 1), kept.lookup(pid))
      })),
      signal: (target, signal) =>
        Clock.currentTimeMillis.pipe(
          Effect.flatMap((at) => Ref.update(requested, (all) => [...all, { target, signal, at }])),
          Effect.zipRight(inner.signal(target, signal))
        )
    }))
    return { layer, scans, rechecks, requested }
  })

/**
 * Effect's own clock, but with its wall time stepped by `stepMs` from
 * `stepIn(ms)` on, as NTP, `date -s` or a VM's resume step it; its
 * monotonic time and its timers run on undisturbed.
 */
export const steppedWallClock = (stepMs: number) => {
  const base = Clock.make()
  let stepsAt = Infinity
  const wall = () => base.unsafeCurrentTimeMillis() + (performance.now() >= stepsAt ? stepMs : 0)
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: wall,
    currentTimeMillis: Effect.sync(wall),
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos(),
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos()),
    sleep: (duration) => base.sleep(duration)
  }
  return { clock, stepIn: (ms: number) => void (stepsAt = performance.now() + ms) }
}

export const HOUR_MS = 3_600_000
