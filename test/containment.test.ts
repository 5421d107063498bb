/**
 * Containment, tried as an adversary would: escapers that leave the session
 * and strip the tag, pid hoppers, a nested corral killed mid-stop, a
 * SIGKILLed `corral run`, and stops whose caller is interrupted. Real
 * processes, real signals, and /proc read directly to see what is left.
 * Every case runs under each backend this machine offers; where cgroup v2
 * is writable the cgroup backend must work, or the suite fails.
 */
import { execFile, spawn, spawnSync } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { randomInt } from "node:crypto"
import * as fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Backend, ShellEvent, ShellInfo } from "@corral/core"
import { Containment, Limits, ProcessGroup, ProcessTable, ShellRegistry } from "@corral/core"
// the cgroup file operations themselves, below the public surface
import * as CellRelease from "../packages/core/src/internal/cellRelease.js"
import * as Cgroup from "../packages/core/src/internal/cgroup.js"
import { makeKeptFiles } from "../packages/core/src/internal/readSmall.js"
import { HOUR_MS, steppedWallClock, wchanOf } from "../packages/core/test/helpers.js"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

const bin = fileURLToPath(new URL("../packages/cli/bin/corral.js", import.meta.url))
const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"

/** Whether this process can create and join a cgroup v2 child: then the cgroup backend must work. */
const cgroupWritable = (() => {
  const mount = fs.readFileSync("/proc/self/mountinfo", "latin1").split("\n")
    .map((l) => l.split(" - "))
    .find(([, rest]) => rest?.startsWith("cgroup2 "))?.[0]?.split(" ")[4]
  const own = /^0::(.*)$/m.exec(fs.readFileSync("/proc/self/cgroup", "latin1"))?.[1]
  if (mount === undefined || own === undefined) return false
  const probe = path.join(mount, own, `corral-test-probe-${process.pid}`)
  try {
    fs.mkdirSync(probe)
    fs.accessSync(path.join(mount, own, "cgroup.procs"), fs.constants.W_OK)
    return true
  } catch {
    return false
  } finally {
    if (fs.existsSync(probe)) fs.rmdirSync(probe)
  }
})()

/** Whether this user can make a PID namespace (a user namespace too, unless root) with perl inside: then pidns must work. */
const pidnsPossible = (() => {
  const base = ["--pid", "--fork", "--mount-proc", "--kill-child"]
  const flags = process.getuid?.() === 0 ? base : ["--user", "--map-current-user", ...base]
  return spawnSync("unshare", [...flags, "perl", "-e", "exit 0"], { stdio: "ignore" }).status === 0
})()

/** The backends whose membership nothing can leave, whatever the process table says. */
const exact: ReadonlyArray<Backend> = [...(cgroupWritable ? ["cgroup" as const] : []), ...(pidnsPossible ? ["pidns" as const] : [])]

/** Whether procScan's leader is its init, a child subreaper (Linux, with perl): then no orphan leaves its descendant tree. */
const procScanReaps = process.platform === "linux" && spawnSync("perl", ["-e", "exit 0"], { stdio: "ignore" }).status === 0

/** The backends that nothing can leave: procScan too where its init reaps, as long as the table tells the truth. */
const escapeProof: ReadonlyArray<Backend> = [...exact, ...(procScanReaps ? ["procScan" as const] : [])]
const backends: ReadonlyArray<Backend> = [...exact, "procScan"]

const GRACE = 300

const layerFor = (backend: Backend, table: Layer.Layer<ProcessTable> = ProcessTable.layer) =>
  Containment.layer(backend).pipe(
    Layer.provideMerge(Layer.mergeAll(table, Limits.layerWith({ grace: Duration.millis(GRACE) }))),
    Layer.orDie
  )

/** procScan whose command leads, with no init: what a host without perl gets (`Containment.layerTest` over the real table). */
const bareProcScanLayer = Containment.layerTest.pipe(
  Layer.provideMerge(Layer.mergeAll(ProcessTable.layer, Limits.layerWith({ grace: Duration.millis(GRACE) })))
)

/** Pids whose environment or PID namespace a table of `layerReadingOwnFiles` was asked for. */
const ownFilesRead = new Set<number>()

/** `layerFor`, with the real table's operations that `wrap` returns in place of its own. */
const layerWrappingTable = (backend: Backend, wrap: (table: ProcessTable["Type"]) => Partial<ProcessTable["Type"]>) =>
  layerFor(
    backend,
    Layer.effect(ProcessTable, Effect.map(ProcessTable, (table): ProcessTable["Type"] => ({ ...table, ...wrap(table) }))).pipe(
      Layer.provide(ProcessTable.layer)
    )
  )

/** `layerFor`, with a table that notes each process whose own files (environment, namespace) it reads. */
const layerReadingOwnFiles = (backend: Backend) =>
  layerWrappingTable(backend, (table) => ({
    shellIdsOf: (pid) => Effect.suspend(() => (ownFilesRead.add(pid), table.shellIdsOf(pid))),
    pidNamespaceOf: (pid, forChildren) => Effect.suspend(() => (ownFilesRead.add(pid), table.pidNamespaceOf(pid, forChildren)))
  }))

/** `layerFor`, with a table that counts its scans of the whole process table. */
const layerCountingScans = (backend: Backend, scans: { count: number }) =>
  layerWrappingTable(backend, (table) => ({
    scan: Effect.suspend(() => (scans.count++, table.scan)),
    scanSince: (since) => Effect.suspend(() => (scans.count++, table.scanSince(since)))
  }))

/**
 * Stops of an obedient shell (`sh` and two `sleep`s), each leaving nothing, until one ends after `looked`
 * scans of the table: the look's own (none under pidns, whose namespace's /proc counts; one under procScan's
 * init, before its signal). A look ends where the shell outlives its command by 5 ms while its members live:
 * then the stop proper takes over, and scans. On a host busy enough that a signalled `sleep` waits longer
 * than that to run (the whole suite on two cores, once in CI), it does so rightly; so the look is asked to
 * end the stop alone in one of three stops.
 */
const obedientStopsScanning = (backend: Backend, looked: number) => {
  const scans = { count: 0 }
  return Effect.gen(function*() {
    const token = newToken()
    yield* Effect.addFinalizer(() => killMarked(token))
    const scansPerStop: Array<number> = []
    for (let round = 0; round < 3 && !scansPerStop.includes(looked); round++) {
      const group = yield* ProcessGroup.spawn({ command: `sleep 6${token} & sleep 7${token} & wait` })
      yield* waitUntil("the two sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 2)
      scans.count = 0
      const report = yield* group.stop()
      scansPerStop.push(scans.count)
      // sh and its two sleeps: not the init (nor pidns's `unshare`), which are corral's
      expect(report, JSON.stringify(report)).toMatchObject({ escalated: false, members: 3, survivors: [], signals: { SIGTERM: 1, SIGCONT: 1 } })
      expect(marked(token), "the shell's processes when its stop returned").toEqual([])
    }
    expect(scansPerStop, "scans of the process table, stop by stop").toContain(looked)
    yield* staysEmpty(token)
  }).pipe(Effect.provide(layerCountingScans(backend, scans)))
}

/** Node's warnings (`name: message`) emitted while the test's scope is open. */
const warningsSeen = Effect.gen(function*() {
  const warnings: Array<string> = []
  const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
  process.on("warning", onWarning)
  yield* Effect.addFinalizer(() => Effect.sync(() => process.off("warning", onWarning)))
  return warnings
})

/** A token no other process carries: each test's processes have it in their argv. */
const newToken = () => `${randomInt(100_000, 999_999)}`

/** The token of the hidden-member tests: their table is made before the test runs. */
const hiddenToken = newToken()

/** The pids /proc lists now. */
const procPids = (): Array<number> => fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n)).map(Number)

/** Whether a `stat` line is a zombie's or a dead process's. */
const isDeadStat = (stat: string) => /^\S+ \(.*\) [ZX] /.test(stat)

/** Whether `pid` is a live process (not a zombie, not gone). */
const alive = (pid: number): boolean => {
  try {
    return !isDeadStat(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    return false
  }
}

/**
 * Live processes whose argv or environment holds the token. Newest first:
 * on a busy host a walk of the namespace's /proc takes longer than a hop
 * or a `sleep 0.05` lives, and read last, the process looked for was gone
 * by then (five hops went unseen for 20 s with four busy loops on two cores).
 */
const marked = (token: string): Array<number> =>
  procPids().sort((a, b) => b - a).filter((pid) => {
    if (pid === process.pid) return false
    try {
      if (isDeadStat(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))) return false
      return fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(token) ||
        fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(token)
    } catch {
      return false
    }
  })

/**
 * Processes with a live thread whose command line holds the token, read
 * thread by thread: once its main thread has ended, a process reads as a
 * zombie with no command line, and only its other threads show what it is.
 */
const threadsMarked = (token: string): Array<number> =>
  procPids().filter((pid) => {
    if (pid === process.pid) return false
    try {
      return fs.readdirSync(`/proc/${pid}/task`).some((tid) =>
        !isDeadStat(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "latin1")) &&
        fs.readFileSync(`/proc/${pid}/task/${tid}/cmdline`, "latin1").includes(token)
      )
    } catch {
      return false
    }
  })

/** Freezes the shell's `sleep` carrying the token once it runs (see `frozenUnkillable`). */
const freezeTheSleeper = (token: string) =>
  Effect.zipRight(
    waitUntil("the sleeper", () => sleeping(token)),
    Effect.suspend(() => frozenUnkillable(marked(token).find((pid) => commOf(pid) === "sleep")!))
  )

/**
 * A shell whose `sleep` is frozen (see `frozenUnkillable`), in a scope of its
 * own that the test closes, and the warnings seen from its start on.
 */
const frozenShell = Effect.gen(function*() {
  const token = newToken()
  const warnings = yield* warningsSeen
  const scope = yield* Scope.make()
  const group = yield* ProcessGroup.spawn({ command: `sleep 6${token} & wait` }).pipe(Scope.extend(scope))
  yield* freezeTheSleeper(token)
  return { group, scope, warnings, sleeper: marked(token).find((pid) => commOf(pid) === "sleep")! }
})

/**
 * Whether `effect` ends within `duration`, awaited from outside: one that
 * never ends (an uninterruptible wait) fails the test, not hangs it.
 */
const endsWithin = <A, E, R>(effect: Effect.Effect<A, E, R>, duration: Duration.DurationInput) =>
  Effect.flatMap(Effect.fork(effect), (fiber) => Effect.map(Effect.option(Effect.timeout(Fiber.await(fiber), duration)), Option.isSome))

/** Of those, the ones whose main thread has ended: their leader is a zombie. */
const zombieLeadersMarked = (token: string) =>
  threadsMarked(token).filter((pid) => {
    try {
      return /^\S+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
    } catch {
      return false
    }
  })

/**
 * Ignores SIGTERM, starts a thread, then ends its main thread alone
 * (`pthread_exit`): the process lives on as a zombie leader with a running
 * thread, which `cgroup.kill` does not end (seen on Linux 6.18) and a
 * SIGKILL to its pid does.
 */
const zombieLeader = (token: string) =>
  `python3 -c 'import ctypes, signal, threading, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); ` +
  `threading.Thread(target=time.sleep, args=(600,)).start(); ctypes.CDLL(None).pthread_exit(None)' ${token}`

const hasPython = spawnSync("python3", ["-c", "import ctypes"], { stdio: "ignore" }).status === 0

/** Where a cgroup v1 freezer is mounted (a hybrid layout, as here), if it is. */
const v1Freezer = fs.readFileSync("/proc/self/mountinfo", "latin1").split("\n")
  .find((line) => / - cgroup \S+ \S*\bfreezer\b/.test(line))?.split(" ")[4]

/** A v1 freezer holds a process in state D, where a SIGKILL waits until it is thawed: a member no signal ends. Root only. */
const canFreezeUnkillable = process.getuid?.() === 0 && v1Freezer !== undefined

/**
 * Freezes `pid` in a v1 freezer cgroup of its own: it ignores every signal,
 * SIGKILL included, until thawed. With the scope, it is killed and thawed,
 * so it ends, and its freezer cgroup is removed.
 */
const frozenUnkillable = (pid: number) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const dir = path.join(v1Freezer!, `corral-test-${pid}`)
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, "cgroup.procs"), String(pid))
      fs.writeFileSync(path.join(dir, "freezer.state"), "FROZEN")
      yield* waitUntil("the freeze", () => fs.readFileSync(path.join(dir, "freezer.state"), "latin1").trim() === "FROZEN")
      return dir
    }),
    (dir) =>
      Effect.gen(function*() {
        safeKill(pid, "SIGKILL")
        fs.writeFileSync(path.join(dir, "freezer.state"), "THAWED")
        yield* waitUntil("the thawed process's end", () => fs.readFileSync(path.join(dir, "cgroup.procs"), "latin1").trim() === "")
        fs.rmdirSync(dir)
      }).pipe(Effect.orDie)
  )

const sidOf = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.split(" ")[3])

const commOf = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "latin1").trim()
  } catch {
    return ""
  }
}

/** Whether a `sleep` carrying the token runs: the command got past its traps (wrappers carry the token too). */
const sleeping = (token: string) => marked(token).some((pid) => commOf(pid) === "sleep")

/** This process's descriptors, each with what it names: a path for a file, `pipe:[...]`, `anon_inode:inotify` and the like for the rest. */
const descriptors = (): Array<{ readonly fd: string; readonly target: string }> =>
  fs.readdirSync("/proc/self/fd").flatMap((fd) => {
    try {
      return [{ fd, target: fs.readlinkSync(`/proc/self/fd/${fd}`) }]
    } catch {
      // closed while listed (the listing's own descriptor among them)
      return []
    }
  })

/**
 * How long a test waits for the world to get somewhere: seconds on a busy
 * host (with the suite and three busy loops on two cores, five hops went
 * unseen for over 5 s), and still inside the test's own 30 s.
 */
const PATIENCE_MS = 20_000

/**
 * Waits until the hopper has hopped a few times: ten distinct pids carrying
 * the token. At most four of a shell's live long (`unshare` and the init
 * under pidns, the outer `sh` and its `sleep 600`); each hop adds its `sh`
 * and its `sleep`. What a pid runs is not read: under a loaded CI a scan
 * outlasts a hop (3 ms), and a hop was gone before its comm could be read
 * (one `sh` seen in 20 s while the pids went from 2881 to 8637).
 */
const hopping = (token: string) =>
  Effect.gen(function*() {
    const seen = new Set<number>()
    const until = Date.now() + PATIENCE_MS
    while (seen.size < 10) {
      if (Date.now() > until) {
        const now = marked(token).map((pid) => `${pid} ${commOf(pid)}`)
        return yield* Effect.dieMessage(`the hopper never hopped: ${seen.size} distinct pids in ${PATIENCE_MS} ms; carrying the token now: ${now.join(", ") || "none"}`)
      }
      for (const pid of marked(token)) seen.add(pid)
      yield* Effect.sleep(2)
    }
  })

/** A group whose command is a TERM-ignoring pid hopper, once it has hopped. */
const spawnHopper = (token: string) => Effect.tap(ProcessGroup.spawn({ command: hopper(token) }), () => hopping(token))

/** Freezes and kills whatever carries the token, until nothing does: a failed test must not leak hoppers. */
const killMarked = (token: string) =>
  Effect.sync(() => {
    for (let round = 0; round < 50; round++) {
      const pids = marked(token)
      if (pids.length === 0) return
      for (const pid of pids) if (pid > 1) safeKill(pid, "SIGSTOP")
      for (const pid of marked(token)) if (pid > 1) safeKill(pid, "SIGKILL")
    }
  })

const safeKill = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

/** Root in the namespace of npm test may choose the next pid (`ns_last_pid`); nowhere else is it ours to change. */
const canChooseNextPid = inPidNamespace && process.getuid?.() === 0

/** A detached child (a group of its own) with pid `pid`, chosen by `ns_last_pid`; undefined where another process has it, or forks kept taking it. */
const spawnWithPid = (pid: number, argv: ReadonlyArray<string>) => {
  for (let attempt = 0; attempt < 50 && !fs.existsSync(`/proc/${pid}`); attempt++) {
    fs.writeFileSync("/proc/sys/kernel/ns_last_pid", String(pid - 1))
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: "ignore" })
    if (child.pid === pid) return child
    child.kill("SIGKILL")
  }
  return undefined
}

/** A process's command line; "" once it is gone. */
const cmdlineOf = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "latin1")
  } catch {
    return ""
  }
}

/** Waits until a registry shell is Lingering: its leader has exited, and processes of it run on. */
const untilLingering = (registry: ShellRegistry["Type"], id: string) =>
  registry.info(id).pipe(
    Effect.repeat({ until: (now) => now.status._tag === "Lingering", schedule: Schedule.spaced("10 millis") }),
    Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => `${id} not Lingering in 5 s` })
  )

/** A directory of its own under the system's temporary one, removed with the scope. */
const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

/** Holds for `ms`: nothing carrying the token may appear at any check (a hopper would). */
const staysEmpty = (token: string, ms = 300) =>
  Effect.gen(function*() {
    const until = Date.now() + ms
    while (Date.now() < until) {
      expect(marked(token), "processes outlived the stop").toEqual([])
      yield* Effect.sleep(10)
    }
  })

/**
 * Under procScan, until its init has said `forked`, a stop's first signal waits for the stop proper, which
 * signals by group: on a busy host the command can fork a crowd before the init gets to say it. The init
 * says it just before it waits for its children (`do_wait`); one turn of the event loop then reads it.
 */
const initSaidForked = (backend: Backend, group: ProcessGroup.ProcessGroup) =>
  backend !== "procScan" ? Effect.void : Effect.zipRight(
    waitUntil("the init's word that it forked the command", () => wchanOf(group.pid) === "do_wait"),
    Effect.sleep(1)
  )

const waitUntil = (what: string, check: () => boolean, ms = PATIENCE_MS) =>
  Effect.gen(function*() {
    const until = Date.now() + ms
    while (!check()) {
      if (Date.now() > until) return yield* Effect.dieMessage(`timed out waiting for ${what}`)
      yield* Effect.sleep(10)
    }
  })

/**
 * Records this process's writes to a `cgroup.procs` (each moves a process
 * between cgroups) until the scope closes; read with the returned function.
 */
const countCgroupMoves = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => {
      const nodeFs = createRequire(import.meta.url)("node:fs") as typeof fs
      const original = nodeFs.writeFileSync
      const moves: Array<string> = []
      nodeFs.writeFileSync = ((file: fs.PathOrFileDescriptor, data: string | NodeJS.ArrayBufferView, options?: fs.WriteFileOptions) => {
        if (String(file).endsWith("cgroup.procs")) moves.push(`${String(data)} -> ${String(file)}`)
        return original(file, data, options)
      }) as typeof fs.writeFileSync
      // the ES module bindings of node:fs follow the change
      syncBuiltinESMExports()
      return { moves, restore: () => (nodeFs.writeFileSync = original, syncBuiltinESMExports()) }
    }),
    ({ restore }) => Effect.sync(restore)
  ),
  ({ moves }) => () => [...moves]
)

/** Each process ignores SIGTERM, forks its successor and exits within a few ms. */
const hopper = (token: string, leave = "") =>
  `export HOP='trap "" TERM; : ${token}; sleep 0.003; ${leave} sh -c "$HOP" & exit 0'; sh -c "$HOP"; sleep 600`

/** Leaves the session and sheds the tag before any stop could see it. */
const escaper = (token: string) => `setsid env -i sh -c 'sleep 6${token}' & sleep 600 & wait`

/** prctl's syscall number here, for `PR_SET_DUMPABLE` (4) in `daemon`. */
const prctlNumber = ({ x64: 157, arm64: 167 } as Record<string, number>)[process.arch]

/**
 * A daemon as ssh-agent makes itself one: it forks, leaves the session,
 * forks again and lets its parent exit, drops its environment, closes its
 * output and makes itself non-dumpable, so that no one but root can read
 * what its environment was (`/proc/<pid>/environ`). Named `d<token>`.
 */
const daemon = (token: string) =>
  `perl -e 'use POSIX; exit 0 if fork; setsid(); exit 0 if fork; ` +
  `${prctlNumber === undefined ? "" : `syscall(${prctlNumber}, 4, 0, 0, 0, 0); `}` +
  `%ENV = (); open(STDIN, "</dev/null"); open(STDOUT, ">/dev/null"); open(STDERR, ">/dev/null"); $0 = "d${token}"; sleep 600'`

const orphaning = inPidNamespace ? describe : describe.skip

orphaning("containment (orphans processes on purpose: needs the PID namespace of npm test)", () => {
  it("offers every backend this machine allows: cgroup where cgroup v2 is writable, pidns where namespaces can be made", () => {
    for (const backend of backends) {
      const built = Effect.runSync(Effect.scoped(Effect.map(Layer.build(layerFor(backend)), (ctx) => ctx.unsafeMap.size)))
      expect(built, backend).toBeGreaterThan(0)
    }
  })

  it.scopedLive("auto picks the strongest backend available", () =>
    Effect.gen(function*() {
      const containment = yield* Containment
      expect(containment.backend).toBe(backends[0])
    }).pipe(Effect.provide(Containment.layer("auto").pipe(
      Layer.provide(Layer.mergeAll(ProcessTable.layer, Limits.layerWith({ grace: Duration.millis(GRACE) })))
    ))))

  it.live("set up with no file descriptor left, every choice says so and what to do; auto never settles for a weaker backend", () =>
    Effect.gen(function*() {
      for (const choice of ["auto", ...backends] as const) {
        expect(yield* setUpWithFreeDescriptors(choice, 0), choice).toEqual({
          failed: `containment backend "${choice}" is not available here: this process has no file descriptor left to set it up (EMFILE). ` +
            "Close some files or raise the limit (`ulimit -n`)."
        })
        // the few a start needs are enough: auto gets the strongest
        expect(yield* setUpWithFreeDescriptors(choice, 16), choice).toEqual({ backend: choice === "auto" ? backends[0] : choice })
      }
    }))

  for (const backend of backends) {
    describe(`backend ${backend}`, () => {
      it.scopedLive("a job the command's TERM trap starts as it exits gets SIGTERM too, within the grace, wherever it is reparented", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // orphaned at once: to PID 1, or to the init that leads a procScan shell, which then outlives it
          const group = yield* ProcessGroup.spawn({ command: `trap 'sleep 7${token} & exit 0' TERM; sleep 6${token} & wait` })
          yield* waitUntil("the first sleep", () => marked(token).some((pid) => commOf(pid) === "sleep"))
          const report = yield* group.stop({ grace: Duration.seconds(10) })
          // one to the group, one to the job by pid, within the grace. Whether the job then dies of it is dash's
          // business: a SIGTERM that meets its fork before the child has reset the trap is lost (about 1 stop in
          // 30), and only the kill ends that job. Without the job's own SIGTERM, the count here is 1.
          expect(report.signals.SIGTERM, JSON.stringify(report)).toBe(2)
          expect(report.survivors, JSON.stringify(report)).toEqual([])
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("a stop that had to kill returns only once every process it struck is done exiting, not once the cell or group reads empty", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // each round races the stop's end against ten processes' exits: a member counted gone while still exiting shows here
          for (let round = 0; round < 10; round++) {
            const group = yield* ProcessGroup.spawn({ command: `trap '' TERM; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 6${token} & done; wait` })
            yield* waitUntil("the sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 10)
            const report = yield* group.stop({ grace: Duration.millis(20) })
            expect(marked(token), `round ${round}: processes alive when the stop returned`).toEqual([])
            expect(report, JSON.stringify(report)).toMatchObject({ escalated: true, survivors: [] })
          }
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("stops an escaper that left the session and dropped its tag while its parent lived", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const group = yield* ProcessGroup.spawn({ command: escaper(token) })
          expect(group.containment).toBe(backend)
          yield* waitUntil("the escaper", () => sleeping(token))
          const report = yield* group.stop()
          expect(report.containment).toBe(backend)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("a stop that had to kill returns once its leader is reaped: the leader's exit status is known then", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          for (let i = 0; i < 4; i++) {
            const group = yield* ProcessGroup.spawn({ command: `trap '' TERM; sleep 6${token} & wait` })
            yield* waitUntil("the sleeper", () => sleeping(token))
            const report = yield* group.stop()
            expect(report, JSON.stringify(report)).toMatchObject({ escalated: true, survivors: [] })
            expect(yield* group.exitStatus, `the leader's exit status at the return of stop ${i + 1}`).toEqual(
              Option.some({ _tag: "Signaled", signal: "SIGKILL" })
            )
            expect(marked(token), `left at the return of stop ${i + 1}`).toEqual([])
          }
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("a wall clock stepped back an hour during the grace holds no stop: the kill comes at the grace's end (ADR 47)", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const wall = steppedWallClock(-HOUR_MS)
          const group = yield* ProcessGroup.spawn({ command: `trap '' TERM; sleep 6${token} & wait` })
          yield* waitUntil("the sleeper", () => sleeping(token))
          wall.stepIn(10)
          const report = yield* group.stop({ grace: Duration.millis(200) }).pipe(
            Effect.withClock(wall.clock),
            Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => new Error("the stop outlived its grace by seconds") })
          )
          expect(report, JSON.stringify(report)).toMatchObject({ containment: backend, escalated: true, survivors: [] })
          expect(report.durationMs).toBeLessThan(3_000)
          expect(marked(token)).toEqual([])
        }).pipe(Effect.provide(layerFor(backend))))

      it.live("stops the shell of a program out of file descriptors: a cell or /proc it cannot open is never taken for empty", () => {
        const token = newToken()
        return Effect.gen(function*() {
          const result = yield* runOutOfDescriptors(backend, token, `trap '' TERM; ${escaper(token)}`)
          expect(result.containment).toBe(backend)
          // the fixture held every descriptor its limit of 256 left it
          expect(result.held).toBeGreaterThan(100)
          expect(result.report, JSON.stringify(result.report)).toMatchObject({ containment: backend, escalated: true, survivors: [] })
          expect(result.aliveAtReturn).toEqual([])
          // a start then has no descriptor for its pipes, and says so
          expect(result.refused).toMatch(/no file descriptor left for the command's pipes \(EMFILE: `ulimit -n` is reached\): close some files or raise the limit$/)
          yield* staysEmpty(token)
        }).pipe(Effect.ensuring(killMarked(token)))
      })

      it.scopedLive("keeps no file open once its stops and member counts are over (each keeps the files it polls open while it runs)", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const containment = yield* Containment
          const round = Effect.scoped(Effect.gen(function*() {
            const group = yield* ProcessGroup.spawn({ command: `sleep 6${token} & sleep 6${token}; wait` })
            // counted once both run: `sh` carries the token too, and under pidns so do `unshare` and the init, before any sleep
            yield* waitUntil("its sleeps", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 2)
            expect(yield* containment.members(group.target)).toBeGreaterThanOrEqual(2)
            yield* group.stop()
          }))
          yield* expectNoDescriptorLeft(round, 4)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("holds a shell on a terminal the same way: its own session, the same cell, and a stop that leaves nothing, an escaper included", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // ignored by the escaper and its sleeps too: the stop must escalate
          const group = yield* ProcessGroup.spawn({ command: `trap '' TERM HUP; ${escaper(token)}`, tty: true })
          expect({ containment: group.containment, tty: group.tty }).toEqual({ containment: backend, tty: true })
          yield* waitUntil("the escaper", () => sleeping(token))
          // forkpty: the leader leads a session whose controlling terminal is the pty
          const [, , pgrp, session, ttyNr] = fs.readFileSync(`/proc/${group.pid}/stat`, "latin1").split(") ")[1]!.split(" ")
          expect({ pgrp: Number(pgrp), session: Number(session) }).toEqual({ pgrp: group.pid, session: group.pid })
          expect(Number(ttyNr)).not.toBe(0)
          if (backend === "cgroup") {
            const own = /^0::(.*)$/m.exec(fs.readFileSync(`/proc/${group.pid}/cgroup`, "latin1"))![1]!
            expect(group.target.cgroup!.endsWith(own), `${group.target.cgroup} holds ${own}`).toBe(true)
          }
          const report = yield* group.stop()
          expect(report.escalated, JSON.stringify(report)).toBe(true)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("a shell on a terminal has its exit status when its command exits, while a child it left in the background runs on", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // the child ignores the hangup the terminal's end sends (cgroup: the command leads the session)
          const group = yield* ProcessGroup.spawn({ command: `trap '' HUP; sleep 6${token} & exit 3`, tty: true })
          // under pidns the leader is unshare, which waits for the whole namespace, and under procScan the init,
          // which waits for what it adopted: the init's report says it sooner
          const exit = yield* group.awaitExit.pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "no exit status in 5 s" }))
          expect(exit).toEqual({ _tag: "Exited", code: 3 })
          const containment = yield* Containment
          expect(yield* containment.members(group.target), "members when the exit status came").toBeGreaterThan(0)
          yield* waitUntil("the background sleep", () => sleeping(token))
          yield* group.stop()
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("a stop at once after a terminal's spawn reaches the command: it ends on SIGTERM, with no grace run out", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // the pty package returns from its fork before the child has made its session: a fast stop can come before it
          for (let i = 0; i < 12; i++) {
            const group = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`], tty: true })
            // under pidns the init forks the command a moment after the spawn, and says so on its report socket
            const report = yield* group.stop({ grace: Duration.seconds(5) })
            expect(report.escalated, `stop ${i}: ${JSON.stringify(report)}`).toBe(false)
            expect(marked(token)).toEqual([])
          }
        }).pipe(Effect.provide(layerFor(backend))))

      if (backend === "cgroup") {
        it.scopedLive("a pipe shell's leader joins its cell by itself: the supervisor moves no process, and the stop finds the leader there", () =>
          Effect.gen(function*() {
            const token = newToken()
            yield* Effect.addFinalizer(() => killMarked(token))
            // moving a process takes the kernel's cgroup write lock (blocking the supervisor): its wrapper does it
            const moves = yield* countCgroupMoves
            const groups = []
            for (let i = 0; i < 5; i++) groups.push(yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] }))
            for (const group of groups) {
              yield* waitUntil("the leader in its cell", () => Cgroup.ownProcs(group.target.cgroup!).includes(group.pid))
            }
            // the macrotasks after the spawns have run
            yield* Effect.sleep(20)
            for (const group of groups) expect((yield* group.stop()).escalated).toBe(false)
            expect(moves()).toEqual([])
            yield* staysEmpty(token)
          }).pipe(Effect.provide(layerFor(backend))))

        it.scopedLive("a stop at once after the spawn, before the wrapper joined its cell, moves no process and leaves nothing", () =>
          Effect.gen(function*() {
            const token = newToken()
            yield* Effect.addFinalizer(() => killMarked(token))
            const moves = yield* countCgroupMoves
            // the wrapper (sh) imports 30000 variables before its join: 70-90 ms here in which the stop comes
            const env = Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`CORRAL_TEST_V${i}`, "x".repeat(16)]))
            let outside = 0
            for (let i = 0; i < 8; i++) {
              // half the commands ignore SIGTERM once they run: a wrapper that joined and exec'd before the
              // signal makes the stop escalate, one that had not dies of the signal with nothing started
              const command = i % 2 === 0 ? ["sleep", `6${token}`] : `trap '' TERM; sleep 6${token} & wait`
              const group = yield* ProcessGroup.spawn({ command, env })
              if (!Cgroup.ownProcs(group.target.cgroup!).includes(group.pid)) outside++
              const report = yield* group.stop({ grace: Duration.millis(500) })
              expect(report.survivors, `stop ${i}: ${JSON.stringify(report)}`).toEqual([])
              if (report.escalated) expect(report.killed, `stop ${i}: ${JSON.stringify(report)}`).toBeGreaterThan(0)
              expect(marked(token), `stop ${i}`).toEqual([])
            }
            expect(outside, "stops that found the wrapper outside its cell").toBeGreaterThanOrEqual(6)
            expect(moves()).toEqual([])
            yield* staysEmpty(token)
          }).pipe(Effect.provide(layerFor(backend))))
      }

      it.scopedLive("stops what an escaper forks after the first scan and then leaves behind: its session is the shell's", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // on SIGTERM the escaper forks a TERM-ignoring sleep and exits, so the sleep's parent is
          // gone before any scan can see the sleep: only its session links it to the shell
          const group = yield* ProcessGroup.spawn({
            command: `setsid env -i sh -c 'trap "trap \\"\\" TERM; sleep 6${token} & exit 0" TERM; sleep 3${token} & wait' & sleep 600 & wait`
          })
          // its own sleep runs once its trap is set: a SIGTERM before that (a loaded machine) would just end it
          yield* waitUntil("the escaper's trap", () => marked(token).some((pid) => commOf(pid) === "sleep" && sidOf(pid) !== group.pid))
          const report = yield* group.stop()
          expect(report.escalated, JSON.stringify(report)).toBe(true)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("stops a TERM-ignoring pid hopper, and says it needed SIGKILL", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const group = yield* spawnHopper(token)
          const report = yield* group.stop()
          expect(report.escalated).toBe(true)
          expect(report.killed).toBeGreaterThan(0)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive.skipIf(!hasPython)("stops a TERM-ignoring process whose main thread ended while another runs (needs python3): a zombie leader cgroup.kill misses", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => Effect.sync(() => threadsMarked(token).forEach((pid) => safeKill(pid, "SIGKILL"))))
          const group = yield* ProcessGroup.spawn({ command: `trap '' TERM; ${zombieLeader(token)} & wait` })
          yield* waitUntil("the main thread's end", () => zombieLeadersMarked(token).length === 1)
          const report = yield* group.stop()
          expect(report.escalated).toBe(true)
          expect(threadsMarked(token), "a thread outlived the stop").toEqual([])
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive.skipIf(!canFreezeUnkillable)(
        "a member no signal ends (frozen by a cgroup v1 freezer: needs root) does not wedge the stop nor the scope's close; both end, the stop naming it",
        () =>
          Effect.gen(function*() {
            const { group, scope, warnings } = yield* frozenShell
            const stopped = yield* group.stop().pipe(Effect.timeout(Duration.millis(GRACE + 3_000)), Effect.option)
            expect(Option.isSome(stopped), "the stop ended within grace + 1 s (+ 2 s of slack)").toBe(true)
            const report = Option.getOrThrow(stopped)
            expect(report.escalated, JSON.stringify(report)).toBe(true)
            expect(report.survivors.length, JSON.stringify(report)).toBeGreaterThan(0)
            // closed as a registry's shutdown closes it: uninterruptibly
            const closed = yield* endsWithin(Effect.uninterruptible(Scope.close(scope, Exit.void)), Duration.seconds(5))
            expect(closed, `the scope's close ended within 5 s; warnings: ${warnings.join("; ")}`).toBe(true)
          }).pipe(Effect.provide(layerFor(backend)))
      )

      it.scopedLive.skipIf(!canFreezeUnkillable)(
        "a scope closed with no stop before, over a member no signal ends (frozen: needs root), says what outlived its stop, by pid",
        () =>
          Effect.gen(function*() {
            const { group, scope, sleeper, warnings } = yield* frozenShell
            expect(yield* endsWithin(Effect.uninterruptible(Scope.close(scope, Exit.void)), Duration.millis(GRACE + 5_000))).toBe(true)
            // a warning is emitted in the next tick
            yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
            // a cell's release names what its cell held; without a cell, the stop's release names its survivors
            // (under pidns the namespace's init too: its exit waits for the frozen sleep's)
            // (an earlier test's cell, left for the next supervisor, may be told of meanwhile: each warning names its shell)
            const said = backend === "cgroup"
              ? new RegExp(`${group.shellId} still held 1 process\\(es\\) after its shell's stop`)
              : new RegExp(`shell ${group.shellId} \\(${backend}\\) left \\d process\\(es\\) that no signal ended: pid\\(s\\) (\\d+, )?${sleeper}$`)
            expect(warnings.filter((w) => said.test(w)), warnings.join("; ")).toHaveLength(1)
          }).pipe(Effect.provide(layerFor(backend)))
      )

      it.scopedLive("a stop at once after the spawn reaches the command: it ends on SIGTERM, with no grace run out", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          for (let i = 0; i < 5; i++) {
            const group = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
            // under pidns the init forks the command a moment after the spawn: a TERM before that would miss it;
            // under cgroup the wrapper may not have joined the cell yet: the group signal reaches it all the same
            const report = yield* group.stop({ grace: Duration.seconds(5) })
            expect(report.escalated, `stop ${i}`).toBe(false)
            expect(marked(token)).toEqual([])
          }
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("gives every member the first signal once: the shell's group by group, a member that left it by pid, named as escaped", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const dir = yield* tempDir("corral-once-")
          // each sh counts the SIGTERMs it gets in a file of its own, and goes on: the stop must escalate
          const counting = (name: string) => `trap 'echo TERM >> ${dir}/${name}' TERM; while :; do sleep 0.05 ${token}; done`
          const group = yield* ProcessGroup.spawn({ command: `setsid sh -c "${counting("escaper")}" & ${counting("leader")}` })
          yield* waitUntil("both loops", () => marked(token).filter((pid) => commOf(pid) === "sleep").length >= 2)
          const escaperPid = marked(token).find((pid) => commOf(pid) === "sh" && sidOf(pid) === pid && pid !== group.pid)
          const report = yield* group.stop()
          const count = (name: string) => fs.existsSync(path.join(dir, name)) ? fs.readFileSync(path.join(dir, name), "latin1").split("\n").filter(Boolean).length : 0
          expect({ leader: count("leader"), escaper: count("escaper") }, JSON.stringify(report)).toEqual({ leader: 1, escaper: 1 })
          expect(report.escalated).toBe(true)
          expect(report.escaped, JSON.stringify(report)).toContain(escaperPid)
          expect(report.members, JSON.stringify(report)).toBeGreaterThanOrEqual(4)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      if (backend === "pidns") {
        it.scopedLive("a stop at once after the start counts the shell's processes, not the host's: its /proc may not be mounted yet", () =>
          Effect.gen(function*() {
            const token = newToken()
            yield* Effect.addFinalizer(() => killMarked(token))
            // the host's /proc, which the leader's root shows until `unshare --mount-proc` has mounted the namespace's
            const host = procPids().length
            for (let round = 0; round < 5; round++) {
              const report = yield* Effect.scoped(Effect.flatMap(ProcessGroup.spawn({ command: ["sleep", `6${token}`] }), (group) => group.stop()))
              expect(report.members, `${JSON.stringify(report)} (the host lists ${host})`).toBeLessThanOrEqual(1)
              expect(report.survivors).toEqual([])
            }
            yield* staysEmpty(token)
          }).pipe(Effect.provide(layerFor(backend))))

        it.scopedLive("an obedient shell's stop is one signal to its group and no scan: the namespace's own /proc counts it, its leader's exit ends it", () =>
          obedientStopsScanning(backend, 0))

        // mounting needs root, which a user namespace of anyone else's does not give the command
        it.scopedLive.skipIf(process.getuid?.() !== 0)(
          "a /proc the command mounted over its namespace's (needs root) changes the count, never the end: the stop still leaves nothing",
          () =>
            Effect.gen(function*() {
              const token = newToken()
              yield* Effect.addFinalizer(() => killMarked(token))
              // an empty /proc (no command seen: the stop proper finds it), and one listing five made-up processes
              for (const lie of ["", "&& mkdir /proc/1 /proc/2 /proc/3 /proc/4 /proc/5"]) {
                const group = yield* ProcessGroup.spawn({ command: `mount -t tmpfs lie /proc ${lie} && exec sleep 6${token}` })
                yield* waitUntil("the sleeper", () => sleeping(token))
                const report = yield* group.stop()
                expect(report, JSON.stringify(report)).toMatchObject({ escalated: false, survivors: [] })
                expect(marked(token), "the namespace's processes when its stop returned").toEqual([])
              }
              yield* staysEmpty(token)
            }).pipe(Effect.provide(layerFor(backend)))
        )

        it.scopedLive("a namespace's kill is one SIGKILL to its leader's group: members in sessions of their own die with its init", () =>
          Effect.gen(function*() {
            const token = newToken()
            yield* Effect.addFinalizer(() => killMarked(token))
            const stubborn = `trap "" TERM; sleep 6${token} & sleep 7${token} & wait`
            const group = yield* ProcessGroup.spawn({ command: `for i in 1 2 3 4 5; do setsid sh -c '${stubborn}' & done; trap '' TERM; wait` })
            yield* waitUntil("the ten sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 10)
            const report = yield* group.stop({ grace: Duration.millis(200) })
            expect(report, JSON.stringify(report)).toMatchObject({ containment: "pidns", escalated: true, survivors: [] })
            expect(report.signals.SIGKILL, "SIGKILLs sent").toBe(1)
            // the five setsid shells and their ten sleeps, named as escaped, were struck all the same
            expect(report.escaped.length, JSON.stringify(report)).toBeGreaterThanOrEqual(15)
            expect(report.killed, JSON.stringify(report)).toBeGreaterThanOrEqual(15)
            yield* staysEmpty(token)
          }).pipe(Effect.provide(layerFor(backend))))
      }

      if (backend === "procScan") {
        it.scopedLive("an obedient shell's first signal goes to its group at once, after one scan of the processes born since the shell; its init's exit ends the stop", () =>
          obedientStopsScanning(backend, 1))
      }

      it.scopedLive("members in a session of their own are found by their descent, no member's own files read, and each group gets the first signal once", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const stubborn = `trap "" TERM; for i in $(seq 30); do sleep 6${token} & done; wait`
          const group = yield* ProcessGroup.spawn({ command: `setsid sh -c '${stubborn}' & trap '' TERM; wait` })
          yield* waitUntil("the 30 sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 30)
          yield* initSaidForked(backend, group)
          const members = new Set(marked(token).filter((pid) => pid !== group.pid))
          ownFilesRead.clear()
          const report = yield* group.stop()
          expect(report, JSON.stringify(report)).toMatchObject({ escalated: true, survivors: [] })
          expect(report.escaped.length, JSON.stringify(report)).toBeGreaterThanOrEqual(31)
          expect([...ownFilesRead].filter((pid) => members.has(pid)), "members whose environment or namespace was read").toEqual([])
          // the first signal goes to the shell's group at once (a cell's listing, a namespace's /proc or the init's
          // scan says whom it reached); the members outside that group are read and signalled one by one after it
          expect(report.signals.SIGTERM, `SIGTERMs: the shell's group, then each escaped member: ${JSON.stringify(report)}`)
            .toBe(1 + report.escaped.length)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerReadingOwnFiles(backend))))

      it.scopedLive("never counts a shell empty while a hopper runs in it, however its hops fall between a scan's reads", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          // a member listed may die before it is read, its successor born after the listing
          const group = yield* spawnHopper(token)
          const containment = yield* Containment
          const counts: Array<number> = []
          const until = Date.now() + 1_000
          while (Date.now() < until) counts.push(yield* containment.members(group.target))
          expect(counts.filter((n) => n === 0).length, "scans that found the hopping shell empty").toBe(0)
          const report = yield* group.stop()
          expect(report.escalated).toBe(true)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("an interrupted stop still runs to its end, and a later stop gets its report", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const scope = yield* Scope.make()
          const group = yield* ProcessGroup.spawn({ command: `trap '' TERM; sleep 6${token} & wait` }).pipe(Scope.extend(scope))
          yield* waitUntil("the sleeper", () => sleeping(token))
          const caller = yield* Effect.fork(group.stop())
          yield* Effect.sleep(50)
          const interruptedAt = Date.now()
          yield* Fiber.interrupt(caller)
          expect(Date.now() - interruptedAt, "the interrupt waited for the stop").toBeLessThan(100)
          const report = yield* group.stop().pipe(Effect.timeout(Duration.millis(GRACE + 1_000)))
          expect(report.escalated).toBe(true)
          expect(marked(token)).toEqual([])
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(layerFor(backend))))

      const registryLayer = ShellRegistry.layer({ name: "containment test", crashSafety: false }).pipe(Layer.provide(layerFor(backend)))

      /** The tags of `id`'s events, from its start to its end (Exited or Killed), as a subscriber saw them. */
      const eventsUntilEnd = (events: Queue.Dequeue<ShellEvent>, id: string) =>
        Effect.gen(function*() {
          const seen: Array<ShellEvent> = []
          while (!seen.some((e) => e._tag === "Exited" || e._tag === "Killed")) {
            const event = yield* Queue.take(events)
            if (("id" in event ? event.id : event.info.id) === id) seen.push(event)
          }
          return seen
        }).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => `no end of ${id} in 5 s` }))

      /**
       * A registry shell that runs `command` to its own end: its events until then are `tags`, its
       * status is Exited with `code`, and a kill after that end returns the report of the end, in
       * which nothing was signalled (not even a pidns shell's `unshare` and init).
       */
      const endsByItself = (command: string, tags: ReadonlyArray<ShellEvent["_tag"]>, code: number) =>
        Effect.gen(function*() {
          const registry = yield* ShellRegistry
          const events = yield* registry.subscribeQueue
          const info = yield* registry.start({ command }, { owner: "t" })
          const seen = yield* eventsUntilEnd(events, info.id)
          expect(seen.map((e) => e._tag)).toEqual(tags)
          expect((yield* registry.info(info.id)).status).toEqual({ _tag: "Exited", code })
          const report = yield* registry.kill(info.id, { owner: "t" })
          expect(report, JSON.stringify(report)).toMatchObject({ members: 0, escalated: false, signals: { SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 } })
        }).pipe(Effect.scoped, Effect.provide(registryLayer))

      it.live.skipIf(!canFreezeUnkillable)(
        "a crash-safe registry's release ends with a shell whose member no signal ends (frozen: needs root): its stop, the cell's release and the watcher's are each bounded",
        () =>
          Effect.gen(function*() {
            const token = newToken()
            const stateDir = yield* tempDir("corral-frozen-")
            const scope = yield* Scope.make()
            const layer = ShellRegistry.layer({ name: "frozen", crashSafety: true, stateDir }).pipe(Layer.provide(layerFor(backend)))
            const registry = Context.get(yield* Layer.buildWithScope(layer, scope), ShellRegistry)
            yield* registry.start({ command: `sleep 6${token} & wait` }, { owner: "t" })
            yield* freezeTheSleeper(token)
            expect(yield* endsWithin(Scope.close(scope, Exit.void), Duration.seconds(10)), "the registry's release ended within 10 s").toBe(true)
          }).pipe(Effect.scoped)
      )

      // Under pidns the leader is `unshare`, whose `--kill-child` is set up by its child after the fork: a
      // kill in between leaves the init and the command running, reparented away from any group of ours.
      // Killed at staggered moments after their starts, some of 24 land there (as nobody, often).
      it.live("a leader killed from outside at once after its start ends its shell whole: Killed, never Lingering, nothing left", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const registry = yield* ShellRegistry
          const events = yield* registry.subscribeQueue
          for (let i = 0; i < 24; i++) {
            const info = yield* registry.start({ command: ["sleep", `6${token}`] }, { owner: "t" })
            const until = performance.now() + (i % 8) * 0.2
            while (performance.now() < until) {}
            process.kill(info.pid, "SIGKILL")
            const seen = yield* eventsUntilEnd(events, info.id)
            expect(seen.map((e) => e._tag), `shell ${i}`).toEqual(["Started", "Exited"])
            expect((yield* registry.info(info.id)).status, `shell ${i}`).toEqual({ _tag: "Killed", signal: "SIGKILL" })
            expect(marked(token), `shell ${i}'s processes at its end`).toEqual([])
          }
          yield* staysEmpty(token)
        }).pipe(Effect.scoped, Effect.provide(registryLayer)))

      it.live("a shell's PATH never chooses the programs that contain it: none along it, or a decoy first, and the command runs contained all the same", () =>
        Effect.gen(function*() {
          const decoys = yield* tempDir("corral-decoys-")
          for (const name of ["unshare", "perl", "sh"]) {
            fs.writeFileSync(path.join(decoys, name), `#!/bin/sh\ntouch ${decoys}/ran-${name}\nexit 99\n`, { mode: 0o755 })
          }
          const registry = yield* ShellRegistry
          for (const PATH of ["/nonexistent", "", decoys]) {
            const info = yield* registry.start({ command: ["/bin/echo", "contained"], env: { PATH } }, { owner: "t" })
            expect((yield* registry.output(info.id, { waitFor: "^contained$", waitMs: 10_000 })).text, `PATH=${PATH}`).toBe("contained\n")
            expect(info.containment).toBe(backend)
          }
          expect(fs.readdirSync(decoys).sort(), "the decoys, none of them run").toEqual(["perl", "sh", "unshare"])
        }).pipe(Effect.scoped, Effect.provide(registryLayer)))

      it.live("a signal sent to a shell is its command's to handle: under pidns it never reaches `unshare`, whose death would end the namespace first", () =>
        Effect.gen(function*() {
          const registry = yield* ShellRegistry
          // on a terminal too, whose leader the pty package reaps on its own: corral never holds it
          for (const tty of [false, true])
          for (const signal of ["SIGHUP", "SIGQUIT", "SIGUSR1", "SIGINT"] as const) {
            const name = signal.slice(3)
            const info = yield* registry.start({ command: `trap 'echo handled ${name}; exit 3' ${name}; echo ready; while :; do sleep 0.05; done`, tty }, { owner: "t" })
            yield* registry.output(info.id, { waitFor: "^ready", waitMs: 10_000 })
            yield* registry.signal(info.id, signal, { owner: "t" })
            const output = yield* registry.output(info.id, { waitFor: `^handled ${name}`, waitMs: 10_000 })
            expect(output.text, `${signal}${tty ? " on a terminal" : ""}`).toContain(`handled ${name}`)
            yield* registry.info(info.id).pipe(
              Effect.repeat({ until: (now) => now.status._tag === "Exited" || now.status._tag === "Killed", schedule: Schedule.spaced("10 millis") }),
              Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => `${info.id} did not end in 5 s` })
            )
            expect((yield* registry.info(info.id)).status, `${signal}${tty ? " on a terminal" : ""}`).toEqual({ _tag: "Exited", code: 3 })
          }
        }).pipe(Effect.scoped, Effect.provide(registryLayer)))

      it.live("an interrupted registry kill does not wedge the shell: a later kill answers", () =>
        Effect.gen(function*() {
          const token = newToken()
          const registry = yield* ShellRegistry
          const info = yield* registry.start({ command: `trap '' TERM; sleep 6${token} & wait` }, { owner: "t" })
          yield* waitUntil("the sleeper", () => sleeping(token))
          const caller = yield* Effect.fork(registry.kill(info.id, { owner: "t" }))
          yield* Effect.sleep(50)
          yield* Fiber.interrupt(caller)
          const report = yield* registry.kill(info.id, { owner: "t" }).pipe(Effect.timeout(Duration.millis(GRACE + 1_000)))
          expect(report.escalated).toBe(true)
          expect((yield* registry.info(info.id)).status._tag).toBe("Killed")
          expect(marked(token)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(registryLayer)))

      it.live("a registry shell whose command exits with nothing left behind is Exited with its code, never Lingering, and nothing is signalled", () =>
        // under pidns, `unshare` and the namespace's init outlive the command a moment: they are not its processes
        endsByItself("exit 3", ["Started", "Exited"], 3))

      it.live("a registry shell lingers with the count of its command's processes alone, and its kill reports the same count", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const registry = yield* ShellRegistry
          const info = yield* registry.start({ command: `sleep 6${token} & exit 0` }, { owner: "t" })
          yield* waitUntil("the sleeper", () => sleeping(token))
          yield* registry.info(info.id).pipe(
            Effect.repeat({ until: (now) => now.status._tag === "Lingering", schedule: Schedule.spaced("10 millis") }),
            Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "not Lingering in 5 s" })
          )
          expect((yield* registry.info(info.id)).status).toEqual({ _tag: "Lingering", exit: { _tag: "Exited", code: 0 }, members: 1 })
          const report = yield* registry.kill(info.id, { owner: "t" })
          expect(report, JSON.stringify(report)).toMatchObject({ members: 1, survivors: [] })
          yield* staysEmpty(token)
        }).pipe(Effect.scoped, Effect.provide(registryLayer)))

      // Under pidns the leader (`unshare`) lives on while the shell lingers, so its group's id stays its own, and
      // so does procScan's init: the bare procScan cell (a host without perl) leaves a leader that is reaped
      const lingerLayer = backend === "procScan"
        ? ShellRegistry.layer({ name: "containment test", crashSafety: false }).pipe(Layer.provide(bareProcScanLayer))
        : registryLayer
      if (backend !== "pidns") {
        it.live.skipIf(!canChooseNextPid)(
          "a signal to a lingering shell goes only to its members in its leader's group: once none is, that group's id may be another's, which gets nothing (needs root in the PID namespace of npm test, to choose the next pid)",
          () =>
            Effect.gen(function*() {
              const token = newToken()
              yield* Effect.addFinalizer(() => killMarked(token))
              const registry = yield* ShellRegistry
              // another test's process may take the pid first (and keep it, a zombie of a PID 1 that reaps no
              // orphan): a new shell then has another pid to try
              let left: ShellInfo | undefined
              let stranger: ChildProcess | undefined
              for (let attempt = 0; attempt < 5 && stranger === undefined; attempt++) {
                // its one process in a session and group of its own: the leader's group is empty once the leader is reaped
                left = yield* registry.start({ command: `setsid sleep 6${token} & exit 0` }, { owner: "t" })
                yield* untilLingering(registry, left.id)
                // a stranger's new group takes the id the leader's group had
                stranger = spawnWithPid(left.pid, ["sleep", `7${token}`])
              }
              yield* Effect.addFinalizer(() => Effect.sync(() => stranger?.kill("SIGKILL")))
              expect(stranger?.pid, "a stranger spawned with the leader's pid").toBe(left!.pid)
              yield* registry.signal(left!.id, "SIGTERM", { owner: "t" })
              yield* Effect.sleep(100)
              expect(stranger!.exitCode === null && stranger!.signalCode === null, "the stranger lives").toBe(true)
              expect((yield* registry.info(left!.id)).status).toMatchObject({ _tag: "Lingering", members: 1 })
              // one whose member is still in the leader's group gets it, there
              const kept = yield* registry.start({ command: `sleep 8${token} & exit 0` }, { owner: "t" })
              yield* untilLingering(registry, kept.id)
              yield* registry.signal(kept.id, "SIGTERM", { owner: "t" })
              yield* waitUntil("the kept member's end", () => !marked(token).some((pid) => cmdlineOf(pid).includes(`8${token}`)))
              yield* registry.kill(left!.id, { owner: "t" })
              expect(stranger!.exitCode === null && stranger!.signalCode === null, "the stranger lives after the kill too").toBe(true)
            }).pipe(Effect.scoped, Effect.provide(lingerLayer))
        )
      }

      it.live("a lingering registry shell whose last process ends by itself is Exited with its command's code, and nothing was signalled", () =>
        endsByItself("sleep 0.3 & exit 5", ["Started", "Lingering", "Exited"], 5))

      it.live("a shell killed, then dropped to make room, and the registry released at once: its scope is closed, nothing of it kept open", () =>
        Effect.gen(function*() {
          const round = Effect.gen(function*() {
            const registry = yield* ShellRegistry
            const first = yield* registry.start({ command: ["sleep", "60"] }, { owner: "t" })
            yield* registry.start({ command: ["sleep", "60"] }, { owner: "t" })
            yield* registry.kill(first.id, { owner: "t" })
            // at the cap: the killed shell is dropped for this one, before its lifecycle closed its scope
            yield* registry.start({ command: ["sleep", "60"] }, { owner: "t" })
          }).pipe(
            Effect.provide(
              ShellRegistry.layer({ name: "containment test", crashSafety: false }).pipe(
                Layer.provide(Layer.merge(layerFor(backend), Limits.layerWith({ grace: Duration.millis(GRACE), maxShells: 2 })))
              )
            )
          )
          yield* expectNoDescriptorLeft(round, 2)
        }))

      it.scopedLive("corral run: a nested corral killed by the outer stop leaves nothing", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const outer = yield* runCorral(backend, [
            "run", "--timeout", "0.5s", "--grace", "0.3s", "--",
            process.execPath, bin, "run", "--timeout", "60s", "--", "sh", "-c", `trap '' TERM; sleep 6${token} & wait`
          ])
          const { code } = yield* outer.exited
          // 124, or 137 as timeout(1) when the inner corral waits for its TERM-ignoring CMD and needs SIGKILL
          expect([124, 137]).toContain(code)
          yield* staysEmpty(token)
        }))

      it.scopedLive("a registry started with no file descriptor left says once that its watcher could not start, has one once it can, and a SIGKILL then leaves nothing", () =>
        Effect.gen(function*() {
          const token = newToken()
          const stateDir = yield* tempDir("corral-nofd-")
          yield* Effect.addFinalizer(() => killMarked(token))
          const result = yield* runWatcherOutOfDescriptors(backend, token, stateDir)
          yield* Effect.addFinalizer(() => Effect.sync(() => result.watchers.forEach((pid) => pid > 1 && alive(pid) && process.kill(pid, "SIGKILL"))))
          // the fixture held every descriptor its limit of 256 left it, then let 64 go
          expect(result.held).toBeGreaterThan(100)
          expect(result.warnedFirst).toEqual([expect.stringMatching(/^the watcher could not start: this process has no file descriptor left for the watcher's pipes \(EMFILE: `ulimit -n` is reached\)/)])
          // tried again each second, and said once
          expect(result.warnings.slice(1)).toEqual([expect.stringMatching(/^the watcher started \(pid \d+\) after it could not: it watches the 1 group\(s\) running$/)])
          expect(result.watchers).toHaveLength(1)
          // the fixture SIGKILLed itself once it printed: the watcher that started late stops its shell
          yield* waitUntil("the late watcher's stop", () => marked(token).length === 0, GRACE + 1_000 + 1_500)
          yield* waitUntil("the late watcher's exit", () => !alive(result.watchers[0]!))
          yield* staysEmpty(token)
          // the registry's parent cgroup and its cells: no later corral of this namespace would remove them
          if (backend === "cgroup") yield* waitUntil("the late watcher's removal of the registry's cgroups", () => cgroupsOf(result.pid).length === 0)
        }))

      it.scopedLive("corral run: SIGKILL of corral itself leaves nothing of CMD after grace + 1 s", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const run = yield* runCorral(backend, ["run", "--grace", "0.3s", "--", "sh", "-c", `trap '' TERM; sleep 6${token} & wait`])
          yield* waitUntil("CMD", () => sleeping(token))
          run.child.kill("SIGKILL")
          const killedAt = Date.now()
          yield* run.exited
          // the promise is grace + 1 s; the slack is for the watcher's own start on a loaded machine
          yield* waitUntil("the watcher's stop", () => marked(token).length === 0, GRACE + 1_000 + 1_500)
          expect(Date.now() - killedAt).toBeLessThan(GRACE + 1_000 + 1_500)
          yield* staysEmpty(token)
          // no later corral of a namespace that may end with it would remove them
          if (backend === "cgroup") yield* waitUntil("the watcher's removal of corral run's cgroups", () => cgroupsOf(run.child.pid!).length === 0)
        }))

      it.scopedLive.skipIf(!canFreezeUnkillable)(
        "corral run: SIGKILL of corral itself while a member no signal ends (frozen: needs root): its watcher's stop still ends, and the watcher with it",
        () =>
          Effect.gen(function*() {
            const token = newToken()
            yield* Effect.addFinalizer(() => killMarked(token))
            const run = yield* runCorral(backend, ["run", "--grace", "0.3s", "--", "sh", "-c", `sleep 6${token} & wait`])
            yield* waitUntil("corral run's watcher", () => watcherOf(run.child.pid!) !== undefined)
            const watcher = watcherOf(run.child.pid!)!
            yield* freezeTheSleeper(token)
            run.child.kill("SIGKILL")
            yield* run.exited
            // its stop: the grace and 1 s of kill rounds; then 1 s for the cell to empty, which it never does
            yield* waitUntil("the watcher's exit", () => !runs(watcher), GRACE + 1_000 + 1_000 + 3_000)
          })
      )
    })
  }

  describe("backend procScan without its init (a host without perl): what it cannot see", () => {
    it.scopedLive("an escaper the scan never saw, holding the shell's pipes, does not hold up the scope's close", () =>
      Effect.gen(function*() {
        const token = newToken()
        yield* Effect.addFinalizer(() => killMarked(token))
        // the documented limit: out of the session, untagged, and orphaned before any scan
        const closed = yield* Effect.scoped(Effect.gen(function*() {
          const group = yield* ProcessGroup.spawn({ command: escaper(token).replace("sleep 600 & wait", "exit 0") })
          yield* waitUntil("the escaper", () => sleeping(token))
          yield* group.awaitExit
          yield* group.stop()
        })).pipe(Effect.timeoutOption("5 seconds"))
        expect(Option.isSome(closed), "the scope's close waited for the pipes' holder").toBe(true)
      }).pipe(Effect.provide(bareProcScanLayer)))
  })

  for (const backend of escapeProof) {
    describe(`backend ${backend}: nothing can leave`, () => {
      it.scopedLive("stops an escaper whose parent died before any stop began", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const group = yield* ProcessGroup.spawn({ command: `setsid env -i sh -c 'sleep 6${token}' & exit 0` })
          yield* waitUntil("the escaper", () => sleeping(token))
          yield* group.awaitExit
          yield* group.stop()
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("stops a hopper that leaves the session at every hop", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const group = yield* ProcessGroup.spawn({ command: hopper(token, "setsid") })
          yield* hopping(token)
          const report = yield* group.stop()
          expect(report.escalated, JSON.stringify(report)).toBe(true)
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))

      it.scopedLive("stops a daemon that double-forks, leaves the session, drops its tag and cannot be read (ssh-agent's way)", () =>
        Effect.gen(function*() {
          const token = newToken()
          yield* Effect.addFinalizer(() => killMarked(token))
          const group = yield* ProcessGroup.spawn({ command: daemon(token) })
          yield* waitUntil("the daemon", () => marked(token).some((pid) => cmdlineOf(pid).includes(`d${token}`)))
          expect(yield* group.awaitExit).toEqual({ _tag: "Exited", code: 0 })
          yield* group.stop()
          yield* staysEmpty(token)
        }).pipe(Effect.provide(layerFor(backend))))
    })
  }

  describe.skipIf(!procScanReaps)("backend procScan: its init (needs Linux and perl)", () => {
    it.scopedLive("a SIGKILL sent to the shell ends its command and spares the init, which keeps what the command left: the stop ends that", () =>
      Effect.gen(function*() {
        const token = newToken()
        yield* Effect.addFinalizer(() => killMarked(token))
        const group = yield* ProcessGroup.spawn({ command: `setsid sleep 6${token} & wait` })
        yield* waitUntil("the escaper", () => sleeping(token))
        yield* group.signal("SIGKILL")
        expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGKILL" })
        // killed with the command, the init would hand the escaper to PID 1
        expect(commOf(group.pid), "the init after the SIGKILL").toBe("perl")
        const escaper = marked(token).find((pid) => commOf(pid) === "sleep")!
        expect(Number(fs.readFileSync(`/proc/${escaper}/stat`, "latin1").split(") ")[1]!.split(" ")[1]), "the escaper's parent").toBe(group.pid)
        yield* group.stop()
        yield* staysEmpty(token)
      }).pipe(Effect.provide(layerFor("procScan"))))
  })

  for (const backend of exact) {
    describe(`backend ${backend}: nothing can leave a table that lies`, () => {
      // the table hides the sleeper, and under pidns every process of the namespace and its leader too: the stop sees none
      const hiddenNames = new Set(["unshare", "perl", "run", `h${hiddenToken}`])
      it.scopedLive("a member the process table hides from the stop still ends with its shell's scope", () =>
        Effect.gen(function*() {
          const token = hiddenToken
          yield* Effect.addFinalizer(() => killMarked(token))
          const hidden = hiddenSleep(token)
          yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(hidden.dir, { recursive: true, force: true })))
          const warnings = yield* warningsSeen
          const shell = yield* Scope.make()
          // it leaves the group and the session: only the backend's own membership holds it, and the table lies about it
          const group = yield* Scope.extend(ProcessGroup.spawn({ command: [hidden.path, `6${token}`] }), shell)
          yield* waitUntil("the hidden sleeper", () => marked(token).some((pid) => commOf(pid) === hidden.comm))
          const report = yield* group.stop({ grace: Duration.millis(100) })
          if (backend === "cgroup") {
            // the kernel still counts a member no reading could find: the stop strikes the cell, and says it did
            expect(report, JSON.stringify(report)).toMatchObject({ escalated: true, killed: 1, survivors: [] })
            yield* staysEmpty(token)
          } else {
            // the table hides the whole namespace: the stop sees no one, and the scope's close ends it all
            expect(marked(token).some((pid) => commOf(pid) === hidden.comm), `alive after a stop that could not see it: ${JSON.stringify(report)}`).toBe(true)
          }
          yield* Scope.close(shell, Exit.void)
          yield* staysEmpty(token)
          if (backend === "cgroup") expect(warnings.join("\n"), "a warning for what the stop had ended itself").not.toContain("after its shell's stop")
        }).pipe(Effect.provide(layerFor(backend, hidingTable(hiddenNames)))))
    })
  }
})

/**
 * A script (`run`) that starts a `sleep` under a name of its own (`comm`,
 * from the link it is run through) in a session of its own, and waits for it.
 */
const hiddenSleep = (token: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-hidden-"))
  const link = path.join(dir, `h${token}`)
  fs.symlinkSync(fs.realpathSync("/bin/sleep"), link)
  const script = path.join(dir, "run")
  // the leader waits for the escaper: under pidns the namespace's init then waits for both
  fs.writeFileSync(script, `#!/bin/sh\nsetsid "${link}" "$@" &\nwait\n`, { mode: 0o755 })
  return { dir, path: script, comm: `h${token}` }
}

/** The real process table, blind to every process whose `comm` is in `hidden`: a table that lies to the stop. */
const hidingTable = (hidden: ReadonlySet<string>) =>
  Layer.effect(
    ProcessTable,
    Effect.map(ProcessTable, (table): ProcessTable["Type"] => {
      const seen = (p: { readonly comm: string }) => !hidden.has(p.comm)
      const lookup = (found: ReturnType<ProcessTable["Type"]["lookup"]>) => Effect.map(found, Option.filter(seen))
      return {
        ...table,
        scan: Effect.map(table.scan, (all) => all.filter(seen)),
        scanSince: (since) => Effect.map(table.scanSince(since), (all) => all.filter(seen)),
        lookup: (pid) => lookup(table.lookup(pid)),
        keptLookups: Effect.map(table.keptLookups, (kept) => ({ ...kept, lookup: (pid) => lookup(kept.lookup(pid)) }))
      }
    })
  ).pipe(Layer.provide(ProcessTable.layer))

/** The real process table, each read of processes it makes counted: a scan, a lookup, or kept lookups for a stop's rechecks. */
const countingTable = (reads: { count: number }) =>
  Layer.effect(
    ProcessTable,
    Effect.map(ProcessTable, (table): ProcessTable["Type"] => {
      const counted = <A>(effect: Effect.Effect<A>) => Effect.suspend(() => (reads.count += 1, effect))
      return {
        ...table,
        scan: counted(table.scan),
        scanSince: (since) => counted(table.scanSince(since)),
        lookup: (pid) => counted(table.lookup(pid)),
        keptLookups: counted(table.keptLookups)
      }
    })
  ).pipe(Layer.provide(ProcessTable.layer))

/** The cgroup backend with a grace of 4 s: a stop's first look then lasts until its leaders exit, or 1 s. */
const firstLookLayer = (reads: { count: number }) =>
  Containment.layer("cgroup").pipe(
    Layer.provideMerge(Layer.mergeAll(countingTable(reads), Limits.layerWith({ grace: Duration.seconds(4) }))),
    Layer.orDie
  )

describe.skipIf(!cgroupWritable)("a stop's first look, at its leaders' exits (needs a writable cgroup v2)", () => {
  const reads = { count: 0 }

  it.scopedLive("an obedient command's stop ends at its leader's exit, with one look at its cell: no process is read, nothing scanned", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const group = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
      yield* waitUntil("the sleeper", () => sleeping(token))
      reads.count = 0
      const report = yield* group.stop()
      expect(reads.count, "processes read by the stop").toBe(0)
      expect(report).toMatchObject({
        containment: "cgroup",
        signals: { SIGTERM: 1, SIGCONT: 1, SIGKILL: 0 },
        escalated: false,
        killed: 0,
        members: 1,
        survivors: [],
        escaped: []
      })
      expect(marked(token)).toEqual([])
      expect(yield* group.awaitExit).toEqual({ _tag: "Signaled", signal: "SIGTERM" })
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("a stop returns only once its leader is reaped: `populated 0` comes while the last member is still exiting", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      // the cell empties in the middle of its last member's exit, before it is a zombie: a stop that
      // ended on that alone returned with the leader still in state R, 2 times in 1500 bench stops
      for (let i = 0; i < 25; i++) {
        const group = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
        yield* waitUntil("the sleeper", () => sleeping(token))
        yield* group.stop()
        expect(Option.isSome(yield* group.exitStatus), `the leader's exit status at the return of stop ${i + 1}`).toBe(true)
        expect(marked(token), `left at the return of stop ${i + 1}`).toEqual([])
      }
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("a stop closes the files of its cells it kept open as it ends, not at its scopes' close", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const groups = yield* Effect.all([1, 2, 3].map(() => ProcessGroup.spawn({ command: ["sleep", `6${token}`] })))
      yield* waitUntil("the three sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 3)
      const cells = groups.map((g) => g.target.cgroup!)
      const kept = () => descriptors().filter(({ target }) => cells.some((cell) => target.startsWith(`${cell}/`)))
      // a macrotask after its spawn, each shell opens its cell's listing and events for its stop
      yield* waitUntil("each cell's two files open", () => kept().length === 6)
      const reports = yield* ProcessGroup.stopAll(groups)
      expect(reports.map((r) => r.survivors)).toEqual([[], [], []])
      expect(kept(), "files of the cells still open after the stop").toEqual([])
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("a group of many ends in the look too: read at its leader's exit and as its members die, its pipes' close among them; no process is read", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const group = yield* ProcessGroup.spawn({ command: `for i in $(seq 20); do sleep 6${token} & done; wait` })
      yield* waitUntil("the 20 sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 20)
      reads.count = 0
      const report = yield* group.stop()
      expect(reads.count, "processes read by the stop").toBe(0)
      expect(report).toMatchObject({
        signals: { SIGTERM: 1, SIGCONT: 1, SIGKILL: 0 },
        escalated: false,
        members: 21,
        survivors: [],
        escaped: []
      })
      // the stop ended with the group, not at the look's end (a quarter into the 4 s grace)
      expect(report.durationMs, JSON.stringify(report)).toBeLessThan(1_000)
      expect(marked(token)).toEqual([])
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("a caller interrupted while its group dies of the signal returns at once; the stop goes on to its end and a later stop gets its report", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      // the leader ends of the signal; its member handles it by forking forever, so the look goes on watching it
      const member = `trap 'while :; do sleep 0.002; done' TERM; while :; do sleep 0.05; done`
      const group = yield* ProcessGroup.spawn({ command: `sh -c "${member}" & wait`, env: { CORRAL_TEST_TOKEN: token } })
      yield* waitUntil("the member's loop", () => marked(token).some((pid) => commOf(pid) === "sleep"))
      const caller = yield* Effect.fork(group.stop({ grace: Duration.seconds(1) }))
      // past the leader's exit, while the member forks on
      yield* Effect.sleep(100)
      expect(yield* group.stopReport, "the stop was over before the interrupt").toEqual(Option.none())
      const interrupted = Date.now()
      yield* Fiber.interrupt(caller)
      expect(Date.now() - interrupted, "the interrupted caller's return (ms)").toBeLessThan(100)
      const report = yield* group.stop()
      expect(report).toMatchObject({ escalated: true, survivors: [] })
      expect(report.durationMs, JSON.stringify(report)).toBeGreaterThanOrEqual(1_000)
      yield* staysEmpty(token)
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("with a grace too long for a timer, the look waits for the leader's exit alone: no timer fires at once, and Node warns of none", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const warnings = yield* warningsSeen
      const group = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
      yield* waitUntil("the sleeper", () => sleeping(token))
      reads.count = 0
      const report = yield* group.stop({ grace: Duration.infinity })
      expect(reads.count, "processes read by the stop").toBe(0)
      expect(report).toMatchObject({ escalated: false, members: 1, survivors: [] })
      // a warning is emitted in the next tick
      yield* Effect.sleep(10)
      expect(warnings).toEqual([])
      expect(marked(token)).toEqual([])
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it("a cgroup is unpopulated only where its events say so: not where they cannot be read", () => {
    const dir = fs.mkdtempSync(path.join(cgroupHome(), "corral-test-events-"))
    try {
      expect(Cgroup.unpopulated(dir)).toBe(true)
      expect(Cgroup.unpopulated(path.join(dir, "missing"))).toBe(false)
      expect(Cgroup.populated(path.join(dir, "missing"))).toBe(false)
    } finally {
      fs.rmdirSync(dir)
    }
  })

  it.scopedLive("the kernel tells when a cell empties: at its last member's exit, at once for one empty already, never where it cannot be watched; no watch outlives its wait", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(cgroupHome(), "corral-test-hint-"))),
        (dir) => Effect.sync(() => Cgroup.remove(dir))
      )
      const member = yield* Effect.acquireRelease(
        Effect.sync(() => spawn("sh", ["-c", `echo $$ > ${dir}/cgroup.procs && exec sleep 60`], { stdio: "ignore" })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      yield* waitUntil("the member in its cell", () => Cgroup.ownProcs(dir).includes(member.pid!))
      let told = 0
      const cancel = Cgroup.onUnpopulated(dir, () => told++)
      expect(inotifyWatches(), "watches while the cell is populated").toBe(1)
      yield* Effect.sleep(50)
      expect(told, "told while the member lives").toBe(0)
      member.kill("SIGTERM")
      yield* waitUntil("the kernel's word", () => told > 0)
      expect(Cgroup.unpopulated(dir)).toBe(true)
      expect(inotifyWatches(), "watches once told").toBe(0)
      cancel()
      expect(told).toBe(1)

      let toldAtOnce = 0
      Cgroup.onUnpopulated(dir, () => toldAtOnce++)
      expect(toldAtOnce, "an empty cell is told of at once").toBe(1)
      let toldMissing = 0
      const cancelMissing = Cgroup.onUnpopulated(path.join(dir, "missing"), () => toldMissing++)
      cancelMissing()
      expect(toldMissing, "a cell that cannot be watched is never told of").toBe(0)
      expect(inotifyWatches(), "watches left").toBe(0)
    }))

  it.scopedLive("a batch settles each group its signal emptied at that group's own leader's exit; a TERM-ignoring one goes on to the stop proper", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const obedient = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
      const stubborn = yield* ProcessGroup.spawn({ command: `trap '' TERM; sleep 7${token} & wait` })
      yield* waitUntil("both sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length === 2)
      const batch = yield* Effect.fork(ProcessGroup.stopAll([obedient, stubborn]))
      // the batch has claimed both by now: this stop joins it
      yield* Effect.sleep(20)
      const early = yield* obedient.stop()
      expect(yield* stubborn.stopReport, "the TERM-ignoring group's stop was over with the obedient one's").toEqual(Option.none())
      expect(early).toMatchObject({ escalated: false, signals: { SIGTERM: 1, SIGCONT: 1, SIGKILL: 0 }, members: 1 })
      const [first, second] = yield* Fiber.join(batch)
      expect(first).toBe(early)
      expect(second).toMatchObject({ escalated: true, survivors: [] })
      expect(marked(token)).toEqual([])
    }).pipe(Effect.provide(firstLookLayer(reads))))

  it.scopedLive("a leader that ends of the signal while its cell holds a member out of its group hands the stop on at once: that member gets SIGTERM", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const dir = yield* tempDir("corral-look-")
      const escaping = `trap 'echo TERM >> ${dir}/escaper; exit 0' TERM; while :; do sleep 0.05 ${token}; done`
      const group = yield* ProcessGroup.spawn({ command: `setsid sh -c "${escaping}" & sleep 6${token} & wait` })
      yield* waitUntil("both sleepers", () => marked(token).filter((pid) => commOf(pid) === "sleep").length >= 2)
      const report = yield* group.stop()
      expect(fs.readFileSync(path.join(dir, "escaper"), "latin1"), JSON.stringify(report)).toBe("TERM\n")
      expect(report.escalated, JSON.stringify(report)).toBe(false)
      // the escaping sh, and the sleep it had running: both out of the group, each signalled by pid
      expect(report.escaped.length, JSON.stringify(report)).toBeGreaterThanOrEqual(1)
      // not at the look's end, a quarter into the 4 s grace: the leader's exit handed it on
      expect(report.durationMs, JSON.stringify(report)).toBeLessThan(1_000)
      yield* staysEmpty(token)
    }).pipe(Effect.provide(firstLookLayer(reads))))
})

describe.skipIf(!cgroupWritable)("a cell's release (needs a writable cgroup v2)", () => {
  it.scopedLive("a process that got into the cell after its shell's stop is killed at the release, and the cell removed", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const warnings = yield* warningsSeen
      const intruder = spawn("sleep", [`6${token}`], { stdio: "ignore" })
      const shell = yield* Scope.make()
      const group = yield* Scope.extend(ProcessGroup.spawn({ command: ["sleep", `7${token}`] }), shell)
      const cell = group.target.cgroup!
      yield* waitUntil("both sleepers", () => marked(token).length === 2)
      expect((yield* group.stop()).survivors).toEqual([])
      // moved in after the stop, as a process that may move others can: the stop never saw it
      fs.writeFileSync(path.join(cell, "cgroup.procs"), String(intruder.pid))
      expect(Cgroup.populated(cell)).toBe(true)
      yield* Scope.close(shell, Exit.void)
      expect(fs.existsSync(cell), "the cell after its release").toBe(false)
      yield* waitUntil("the intruder's end", () => intruder.signalCode !== null || intruder.exitCode !== null)
      expect(intruder.signalCode).toBe("SIGKILL")
      yield* waitUntil("the warning", () => warnings.some((w) => w.includes(cell)))
      expect(warnings.find((w) => w.includes(cell))).toContain("still held 1 process(es) after its shell's stop; killed and removed")
    }).pipe(Effect.provide(layerFor("cgroup"))))

  it.scopedLive("a command that makes a cgroup inside its cell and freezes a TERM-ignoring child there is stopped whole, and its cell removed with that cgroup", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const mount = Cgroup.mountPoint()!
      // as a command with the right to write its own cell can (root here): v2's freeze holds it where SIGCONT cannot reach
      const jail = `cell=${mount}$(sed -n 's/^0:://p' /proc/self/cgroup); mkdir "$cell/jail"; ` +
        `sh -c 'trap "" TERM; echo $$ > "$0/jail/cgroup.procs"; exec sleep 6${token}' "$cell" & ` +
        `until grep -q . "$cell/jail/cgroup.procs"; do sleep 0.01; done; echo 1 > "$cell/jail/cgroup.freeze"; trap '' TERM; wait`
      const shell = yield* Scope.make()
      const group = yield* Scope.extend(ProcessGroup.spawn({ command: jail }), shell)
      const cell = group.target.cgroup!
      yield* waitUntil("the frozen sleeper", () =>
        fs.existsSync(path.join(cell, "jail", "cgroup.events")) && /frozen 1/.test(fs.readFileSync(path.join(cell, "jail", "cgroup.events"), "latin1")))
      const report = yield* group.stop()
      expect(report, JSON.stringify(report)).toMatchObject({ escalated: true, survivors: [] })
      yield* staysEmpty(token)
      yield* Scope.close(shell, Exit.void)
      expect(fs.existsSync(cell), "the cell and the cgroup made inside it, after the release").toBe(false)
    }).pipe(Effect.provide(layerFor("cgroup"))))
})

describe("a cell's release where the kernel has no cgroup.kill (Linux before 5.14, in a directory laid out as a cell)", () => {
  it.scopedLive("each process the still-populated cell lists gets SIGKILL, and the warning says the cell was left", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const cell = fs.mkdtempSync(path.join(os.tmpdir(), "corral-cell-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(cell, { recursive: true, force: true })))
      const warnings = yield* warningsSeen
      const listed = spawn("sleep", [`6${token}`], { stdio: "ignore" })
      yield* waitUntil("the listed sleeper", () => sleeping(token))
      // the cell's files as the kernel would show them, and a `cgroup.kill` that cannot be written
      fs.writeFileSync(path.join(cell, "cgroup.events"), "populated 1\nfrozen 0\n")
      fs.writeFileSync(path.join(cell, "cgroup.stat"), "nr_descendants 0\n")
      fs.writeFileSync(path.join(cell, "cgroup.procs"), `${listed.pid}\n`)
      // a directory that is not empty: neither written to nor removed as a cell below this one would be
      fs.mkdirSync(path.join(cell, "cgroup.kill"))
      fs.writeFileSync(path.join(cell, "cgroup.kill", "keep"), "")
      yield* CellRelease.release(cell, yield* ProcessTable)
      yield* waitUntil("the listed sleeper's end", () => listed.signalCode !== null || listed.exitCode !== null)
      expect(listed.signalCode).toBe("SIGKILL")
      yield* waitUntil("the warning", () => warnings.some((w) => w.includes(cell)))
      expect(warnings.find((w) => w.includes(cell))).toContain("still held 1 process(es) after its shell's stop; killed, and not empty after 1000 ms")
    }).pipe(Effect.provide(ProcessTable.layer)))
})

describe.skipIf(!cgroupWritable || !inPidNamespace)("cgroup leftovers (needs a writable cgroup v2 and the PID namespace of npm test)", () => {
  it.scopedLive("a dead supervisor's cgroups are stopped and removed by the next one; a live one's and another namespace's are left alone", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      const home = cgroupHome()
      const ns = /\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))![1]
      const uid = process.getuid!()
      const parent = (pid: number, nsInode: string | undefined = ns) => path.join(home, `corral-${uid}-${nsInode}-${pid}-1-abcdef`)
      // a supervisor pid that is dead (it has exited and been reaped), one alive with another start time, and ourselves
      const dead = spawnSync("true").pid!
      const dirs = { dead: parent(dead), otherNamespace: parent(dead, "1"), live: path.join(home, `corral-${uid}-${ns}-${process.pid}-${startTimeOf(process.pid)}-abcdef`) }
      for (const dir of Object.values(dirs)) fs.mkdirSync(path.join(dir, "1-s1"), { recursive: true })
      // after the processes: a cgroup can be removed only once it is empty
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          killMarked(token),
          waitUntil("the test's cgroups to empty", () => {
            for (const dir of Object.values(dirs)) {
              try {
                if (fs.existsSync(path.join(dir, "1-s1"))) fs.rmdirSync(path.join(dir, "1-s1"))
                if (fs.existsSync(dir)) fs.rmdirSync(dir)
              } catch {
                return false
              }
            }
            return true
          })
        )
      )
      const inCgroup = (dir: string) =>
        spawn("sh", ["-c", `echo $$ > ${path.join(dir, "1-s1")}/cgroup.procs && trap '' TERM && exec sleep 6${token}`], { stdio: "ignore" })
      const left = inCgroup(dirs.dead)
      const kept = [inCgroup(dirs.live), inCgroup(dirs.otherNamespace)]
      yield* waitUntil("the leftovers", () => marked(token).length === 3)
      yield* Effect.gen(function*() {
        yield* (yield* Containment).reapLeftovers
      }).pipe(Effect.provide(layerFor("cgroup")))
      expect(fs.existsSync(dirs.dead)).toBe(false)
      expect(marked(token).sort()).toEqual(kept.map((c) => c.pid!).sort())
      expect(left.pid !== undefined && !marked(token).includes(left.pid)).toBe(true)
    }))

  it.scopedLive("another namespace's cgroups are removed once empty and old: its supervisor may have died with the namespace", () =>
    Effect.gen(function*() {
      const home = cgroupHome()
      const uid = process.getuid!()
      const foreign = (tag: string) => path.join(home, `corral-${uid}-1-4242-1-${tag}`)
      const dirs = { old: foreign("a0a0a0"), young: foreign("b0b0b0") }
      for (const dir of Object.values(dirs)) fs.mkdirSync(path.join(dir, "1-s1"), { recursive: true })
      // rmdir, child first: cgroupfs's files cannot be unlinked
      const rmdir = (dir: string) => fs.existsSync(dir) && fs.rmdirSync(dir)
      yield* Effect.addFinalizer(() => Effect.sync(() => Object.values(dirs).forEach((dir) => [path.join(dir, "1-s1"), dir].forEach(rmdir))))
      // as if made two hours ago: cgroupfs keeps the time a directory was made as its mtime
      const past = new Date(Date.now() - 2 * 3600_000)
      for (const dir of [path.join(dirs.old, "1-s1"), dirs.old]) fs.utimesSync(dir, past, past)
      yield* Effect.gen(function*() {
        yield* (yield* Containment).reapLeftovers
      }).pipe(Effect.provide(layerFor("cgroup")))
      // the young one may be a cell its live owner is about to join
      expect({ old: fs.existsSync(dirs.old), young: fs.existsSync(path.join(dirs.young, "1-s1")) }).toEqual({ old: false, young: true })
    }))

  it.scopedLive("a cgroup's tree: the cgroups below it at any depth where it has some, itself alone where cgroup.stat counts none", () =>
    Effect.gen(function*() {
      const top = path.join(cgroupHome(), `corral-test-tree-${process.pid}`)
      const dirs = [top, path.join(top, "a"), path.join(top, "a", "b"), path.join(top, "c")]
      yield* Effect.acquireRelease(
        Effect.sync(() => dirs.forEach((dir) => fs.mkdirSync(dir))),
        () => Effect.sync(() => [...dirs].reverse().forEach((dir) => fs.existsSync(dir) && fs.rmdirSync(dir)))
      )
      expect({ top: Cgroup.tree(top).sort(), leaf: Cgroup.tree(dirs[2]!) }).toEqual({ top: [...dirs].sort(), leaf: [dirs[2]] })
    }))

  it.scopedLive("a kept cgroup file reads what is there now; once its cgroup is gone it fails once, then reads the one made again under the name", () =>
    Effect.gen(function*() {
      const dir = path.join(cgroupHome(), `corral-test-kept-${process.pid}`)
      const rmdir = () => fs.existsSync(dir) && fs.rmdirSync(dir)
      const files = yield* Effect.acquireRelease(Effect.sync(() => makeKeptFiles(1)), (kept) => Effect.sync(() => (kept.close(), rmdir())))
      fs.mkdirSync(dir)
      const procs = path.join(dir, "cgroup.procs")
      const before = files.read(procs)
      const child = spawn("sh", ["-c", `echo $$ > ${procs} && exec sleep 5`], { stdio: "ignore" })
      yield* waitUntil("the child in its cgroup", () => fs.readFileSync(procs, "latin1") !== "")
      const during = files.read(procs)
      child.kill("SIGKILL")
      yield* waitUntil("the child gone", () => fs.readFileSync(procs, "latin1") === "")
      rmdir()
      fs.mkdirSync(dir)
      const stale = Effect.runSync(Effect.either(Effect.try(() => files.read(procs))))
      // beyond what it keeps, a file is read as readSmall reads it
      const unkept = files.read(path.join(dir, "cgroup.events"))
      expect({ before, during, stale: stale._tag, after: files.read(procs), unkept }).toEqual({
        before: "",
        during: `${child.pid}\n`,
        stale: "Left",
        after: "",
        unkept: fs.readFileSync(path.join(dir, "cgroup.events"), "latin1")
      })
    }))

  it.scopedLive("a supervisor whose parent cgroup was removed under it makes it again: its next shell is still held by its cgroup", () =>
    Effect.gen(function*() {
      const token = newToken()
      yield* Effect.addFinalizer(() => killMarked(token))
      // its cell goes with its scope
      const parent = yield* Effect.scoped(Effect.map(ProcessGroup.spawn({ command: ["true"] }), (first) => path.dirname(first.target.cgroup!)))
      // what a supervisor of another namespace does to an empty parent
      fs.rmdirSync(parent)
      const next = yield* ProcessGroup.spawn({ command: ["sleep", `6${token}`] })
      expect({ containment: next.containment, parent: path.dirname(next.target.cgroup ?? "") }).toEqual({ containment: "cgroup", parent })
      yield* next.stop()
    }).pipe(Effect.provide(layerFor("cgroup"))))
})

const outOfDescriptors = fileURLToPath(new URL("./fixtures/stop-out-of-descriptors.mjs", import.meta.url))
const containmentOutOfDescriptors = fileURLToPath(new URL("./fixtures/containment-out-of-descriptors.mjs", import.meta.url))

/** Sets up `choice` in a fixture that leaves `free` descriptors free (see it): the backend it got, or how it failed. */
const setUpWithFreeDescriptors = (choice: Backend | "auto", free: number) =>
  Effect.async<{ backend: Backend } | { failed: string }, Error>((resume) => {
    const env = { ...process.env, CORRAL_CONTAINMENT: choice }
    const child = execFile("sh", ["-c", `ulimit -n 256 && exec "$0" "$@"`, process.execPath, containmentOutOfDescriptors, `${free}`], { timeout: 20_000, env }, (error, stdout, stderr) => {
      if (error) return resume(Effect.fail(new Error(`the fixture failed: ${error.message}\n${stderr}`)))
      resume(Effect.try({ try: () => JSON.parse(stdout.trim()), catch: () => new Error(`the fixture printed no result: ${stdout}`) }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const watcherOutOfDescriptors = fileURLToPath(new URL("./fixtures/watcher-out-of-descriptors.mjs", import.meta.url))

/** Runs the fixture of a registry out of descriptors (see it); it prints one line, then SIGKILLs itself. */
const runWatcherOutOfDescriptors = (backend: Backend, token: string, stateDir: string) =>
  Effect.async<{ pid: number; held: number; warnedFirst: Array<string>; warnings: Array<string>; shell: number; watchers: Array<number> }, Error>((resume) => {
    const env = { ...process.env, CORRAL_CONTAINMENT: backend }
    const child = execFile("sh", ["-c", `ulimit -n 256 && exec "$0" "$@"`, process.execPath, watcherOutOfDescriptors, token, stateDir], { timeout: 20_000, env }, (_, stdout, stderr) => {
      if (child.signalCode !== "SIGKILL" || child.killed) return resume(Effect.fail(new Error(`the fixture did not kill itself (${child.signalCode ?? child.exitCode}): ${stdout}\n${stderr}`)))
      resume(Effect.try({ try: () => JSON.parse(stdout.trim().split("\n").at(-1)!), catch: () => new Error(`the fixture printed no result: ${stdout}\n${stderr}`) }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Runs `command` under `backend` in a process limited to 256 descriptors, and stops it with all of them taken (see the fixture). */
const runOutOfDescriptors = (backend: Backend, token: string, command: string) =>
  Effect.async<{ containment: Backend; held: number; refused: string; report: Record<string, unknown>; aliveAtReturn: Array<number> }, Error>((resume) => {
    const child = execFile("sh", ["-c", `ulimit -n 256 && exec "$0" "$@"`, process.execPath, outOfDescriptors, backend, token, command], { timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) return resume(Effect.fail(new Error(`the fixture failed: ${error.message}\n${stderr}`)))
      resume(Effect.try({ try: () => JSON.parse(stdout.trim().split("\n").at(-1)!), catch: () => new Error(`the fixture printed no result: ${stdout}`) }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/**
 * Runs `round` once, then again and `repeats` more times (`repeatN`), and expects as many open
 * descriptors after as after the first: that one opens what stays open for
 * good (loaded code, the runtime's own). Kept /proc files close in the
 * macrotask after a stop, hence the pauses.
 */
const expectNoDescriptorLeft = <E, R>(round: Effect.Effect<unknown, E, R>, repeats: number) =>
  Effect.gen(function*() {
    const openFiles = () => fs.readdirSync("/proc/self/fd").length
    yield* round
    yield* Effect.sleep(Duration.millis(50))
    const before = openFiles()
    yield* Effect.repeatN(round, repeats)
    yield* Effect.sleep(Duration.millis(50))
    expect(openFiles()).toBe(before)
  })

/** Field 22 of `/proc/<pid>/stat`: clock ticks since boot. */
const startTimeOf = (pid: number) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
}

/** `corral ARGS` under a backend; killed if still running when the scope closes. */
/** The parent cgroups a supervisor of this namespace with that pid made (`corral-<uid>-<pidns>-<pid>-…`). */
const cgroupsOf = (pid: number): Array<string> => {
  const ns = /\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))![1]
  return fs.readdirSync(cgroupHome()).filter((name) => name.startsWith(`corral-${process.getuid!()}-${ns}-${pid}-`))
}

/** How many inotify watches this process holds (fs.watch's), from its inotify descriptors' fdinfo. */
const inotifyWatches = () =>
  descriptors().filter(({ target }) => target.includes("inotify")).reduce((watches, { fd }) => {
    try {
      return watches + fs.readFileSync(`/proc/self/fdinfo/${fd}`, "latin1").split("\n").filter((l) => l.startsWith("inotify wd:")).length
    } catch {
      return watches
    }
  }, 0)

/** This process's own cgroup v2 directory, where a supervisor makes its parent cgroups. */
const cgroupHome = () => {
  const mount = fs.readFileSync("/proc/self/mountinfo", "latin1").split("\n").map((l) => l.split(" - "))
    .find(([, rest]) => rest?.startsWith("cgroup2 "))![0]!.split(" ")[4]!
  return path.join(mount, /^0::(.*)$/m.exec(fs.readFileSync("/proc/self/cgroup", "latin1"))![1]!)
}

/** Whether `pid` is alive: neither gone nor a zombie. */
const runs = (pid: number) => {
  try {
    return !isDeadStat(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    return false
  }
}

/** The watcher process a supervisor `parent` started, if it runs. */
const watcherOf = (parent: number): number | undefined =>
  procPids().find((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.split(" ")[1] === String(parent) &&
        fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").includes("watcherMain")
    } catch {
      return false
    }
  })

const runCorral = (backend: Backend, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [bin, ...args], { stdio: "ignore", env: { ...process.env, CORRAL_CONTAINMENT: backend } })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    const exited = Effect.async<{ code: number | null }>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed({ code: child.exitCode }))
      child.once("exit", (code) => resume(Effect.succeed({ code })))
    })
    return { child, exited }
  })

describe.skipIf(!pidnsPossible)("a PID namespace whose init never ran the command (needs unshare and perl, and user namespaces unless root)", () => {
  /**
   * `unshare` exits 1 when it cannot fork the namespace's init (EAGAIN at the
   * user's process limit, `ulimit -u`): tried as `nobody` with `prlimit
   * --nproc`, but a limit that lets the supervisor start and stops `unshare`
   * depends on how many threads every process of the user has at that moment.
   * So an `unshare` on the supervisor's PATH stands in for that one case: the
   * layer's probe goes to the real one, and every shell gets its message and
   * its exit code, with no namespace made and nothing forked.
   */
  const failingUnshare = Effect.acquireRelease(
    Effect.sync(() => {
      const real = spawnSync("sh", ["-c", "command -v unshare"], { encoding: "utf8" }).stdout.trim()
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-unshare-"))
      fs.writeFileSync(
        path.join(dir, "unshare"),
        `#!/bin/sh\ncase "$*" in *"exit 0") exec ${real} "$@" ;; esac\necho "unshare: fork failed: Resource temporarily unavailable" >&2\nexit 1\n`,
        { mode: 0o755 }
      )
      const PATH = process.env.PATH
      process.env.PATH = `${dir}:${PATH}`
      return { dir, PATH }
    }),
    ({ dir, PATH }) =>
      Effect.sync(() => {
        process.env.PATH = PATH
        fs.rmSync(dir, { recursive: true, force: true })
      })
  )

  it.scopedLive("exits 125, as timeout(1) does when it fails itself, not with the wrapper's code, and its output keeps the wrapper's message", () =>
    Effect.gen(function*() {
      yield* failingUnshare
      const { group, text } = yield* Effect.provide(
        Effect.gen(function*() {
          const group = yield* ProcessGroup.spawn({ command: ["sh", "-c", "echo the command ran"] })
          yield* group.awaitExit
          yield* Effect.scoped(Effect.flatMap(group.output.live, (live) => Stream.runDrain(live)))
          return { group, text: (yield* group.output.readSince(0)).text }
        }),
        layerFor("pidns")
      )
      expect(group.containment).toBe("pidns")
      expect(yield* group.awaitExit).toEqual({ _tag: "Exited", code: 125 })
      expect(text).toContain("unshare: fork failed: Resource temporarily unavailable")
      expect(text).not.toContain("the command ran")
    }))

  it.scopedLive("a command that ran keeps its own code, however fast it exits: 40 starts of `exit 3`", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 40; i++) {
        const group = yield* ProcessGroup.spawn({ command: ["sh", "-c", "exit 3"] })
        expect(yield* group.awaitExit, `start ${i}`).toEqual({ _tag: "Exited", code: 3 })
      }
    }).pipe(Effect.provide(layerFor("pidns"))))
})
