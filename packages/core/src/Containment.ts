/**
 * How a shell's processes are held, enumerated, signalled and confirmed
 * gone: the one place that knows. Three backends:
 *
 * - `cgroup`: each shell runs in a cgroup v2 of its own, joined before the
 *   command is exec'd, so nothing it forks is ever outside. Membership is
 *   exact and costs a read of `cgroup.procs`, however busy the host; the kill
 *   is `cgroup.kill`. Needs a writable cgroup2 hierarchy (root, or a
 *   delegated subtree).
 * - `pidns`: each shell runs in a PID namespace of its own (`unshare`, as
 *   an unprivileged user through a user namespace that maps only their own
 *   uid), under a small init that is not the user's command. Nothing can
 *   leave it, and when its init dies the kernel kills everything inside.
 *   Needs `unshare` (util-linux) and `perl`, and user namespaces for non-root.
 * - `procScan`: the process group, the session, the `CORRAL_SHELL_ID` tag
 *   chain and the descendant tree, found by scanning the process table;
 *   the kill freezes before it strikes. Works everywhere. On Linux with
 *   `perl`, the leader is the same small init, made a child subreaper: an
 *   orphan of the command's becomes the init's child, not PID 1's, so a
 *   daemon that strips the tag and starts a new session stays in the
 *   descendant tree (ADR 58). Without it, a scan cannot see a process that
 *   did so before a scan caught it.
 *
 * `layer` picks cgroup where it works, else pidns, else procScan;
 * `CORRAL_CONTAINMENT` overrides it.
 */
import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { StopOptions, StopReport, StopTarget } from "./GroupStop.js"
import * as GroupStop from "./GroupStop.js"
import * as CellRelease from "./internal/cellRelease.js"
import * as Cgroup from "./internal/cgroup.js"
import * as Executable from "./internal/executable.js"
import * as Descriptors from "./internal/descriptors.js"
import * as MembershipImpl from "./internal/membership.js"
import { Limits } from "./Limits.js"
import { isGone, ProcessTable } from "./ProcessTable.js"
import { backends } from "./internal/backends.js"

export { backends } from "./internal/backends.js"
export type Backend = (typeof backends)[number]

/** Where one shell is held. */
export interface Cell {
  readonly backend: Backend
  /** The shell's cgroup, when it has one. */
  readonly cgroup: string | undefined
  /**
   * Whether the leader is a wrapper that stays (not the command), and reports
   * on a channel of its own, line by line, `forked` once the command's
   * process exists and the command's raw wait status when it exits.
   */
  readonly reportsExit: boolean
  /**
   * Whether the leader is corral's init made a child subreaper (procScan,
   * see `init`): the command is its child, and every process the command
   * orphans becomes the init's child, not PID 1's.
   */
  readonly reaper: boolean
  /**
   * The argv that runs `file args` inside the cell from its first
   * instruction. Where the leader reports, it does so on fd 3, or with
   * `report`, on the unix socket at that path (a terminal passes no fd 3),
   * or nowhere if that is empty.
   */
  readonly wrap: (file: string, args: ReadonlyArray<string>, report?: string) => readonly [string, ReadonlyArray<string>]
  /**
   * Removes the cell (a cgroup's, struck first if its shell's stop left
   * anything in it): run it once that stop is over. Nothing when done at
   * once, the usual case; else what is left to run.
   */
  readonly release: () => Effect.Effect<void> | undefined
}

// a Data error, not a Schema one: `corral run` must not pay for loading Schema at every start
export class ContainmentUnavailable extends Data.TaggedError("ContainmentUnavailable")<{
  readonly backend: string
  readonly reason: string
  /** What to do about it, where another backend would not do. */
  readonly fix?: string | undefined
}> {
  override get message() {
    return `containment backend "${this.backend}" is not available here: ${this.reason}. ` +
      (this.fix ?? `Unset CORRAL_CONTAINMENT (or pass auto) to let corral pick one that works.`)
  }
}

/**
 * How many descriptors setting up must find free: as many as a start takes
 * for a shell's three pipes (with fewer, no shell could start), and more
 * than the probe of pidns holds while it spawns `unshare`.
 */
const SETUP_DESCRIPTORS = 6

/**
 * Fails where this process has too few descriptors left to set up any
 * backend. Each setup reads kernel files or spawns a probe, and one that
 * cannot reads as unavailable: `auto` then settled for process scans, which
 * an escaper leaves, and a named backend was said to be missing, with the
 * advice to pick another.
 */
const descriptorsToSetUp = (backend: string): Effect.Effect<void, ContainmentUnavailable> =>
  Effect.suspend(() => {
    const refused = Descriptors.shortOf(SETUP_DESCRIPTORS)
    return refused === undefined ? Effect.void : new ContainmentUnavailable({
      backend,
      reason: `this process has no file descriptor left to set it up (${refused})`,
      fix: "Close some files or raise the limit (`ulimit -n`)."
    })
  })

const make = (
  backend: Backend,
  cell: (shellId: string) => Effect.Effect<Cell>,
  reap: Effect.Effect<void, never, ProcessTable | Limits>,
  cells?: string
) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<ProcessTable | Limits>()
    const table = yield* ProcessTable
    return {
      backend,
      cells,
      cell,
      stop: GroupStop.makeStop(table, yield* Limits),
      members: (target) =>
        Effect.acquireUseRelease(
          MembershipImpl.make(table, [target]),
          (membership) => Effect.map(membership.scan, () => MembershipImpl.commandsOf(membership.groups[0]!).length),
          (membership) => membership.release
        ),
      reapLeftovers: Effect.provide(reap, context)
    } satisfies Containment["Type"]
  })

const nothingToRelease = () => undefined

/** procScan where no init can be its leader: the command itself leads, and what it orphans goes to PID 1. */
const bareProcScanCell: Cell = {
  backend: "procScan",
  cgroup: undefined,
  reportsExit: false,
  reaper: false,
  wrap: (file, args) => [file, args],
  release: nothingToRelease
}

/**
 * prctl's syscall number on each architecture Node runs Linux on, for the
 * init's `PR_SET_CHILD_SUBREAPER` (perl's `syscall` takes the raw number).
 */
const PRCTL: Partial<Record<NodeJS.Architecture, number>> = {
  x64: 157,
  arm64: 167,
  riscv64: 167,
  loong64: 167,
  ia32: 172,
  arm: 172,
  s390x: 172,
  ppc64: 171
}

/**
 * procScan's cell: the init leads (see `init`), a child subreaper, so the
 * descendant tree holds every process the command starts, whatever it
 * does with its tag, group and session (ADR 58). The bare cell where
 * that cannot be: not Linux, an architecture whose prctl is not known
 * here, or no `perl`.
 */
const procScanCell = (): Cell => {
  const prctl = process.platform === "linux" ? PRCTL[process.arch] : undefined
  const perl = prctl === undefined ? undefined : ownTool("perl")
  if (typeof perl !== "string") return bareProcScanCell
  return {
    backend: "procScan",
    cgroup: undefined,
    reportsExit: true,
    reaper: true,
    wrap: (file, args, report = "3") => [perl, ["-e", init, report, String(prctl), file, ...args]],
    release: nothingToRelease
  }
}

/**
 * The shell joins its cgroup from a one-line sh that then execs the command:
 * pid, session and group stay the command's, and nothing it forks is ever
 * outside. If the join fails the command never starts.
 */
const joinThenExec = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'

const cgroupCell = (parent: string, table: ProcessTable["Type"]) => {
  let counter = 0
  let fallback: Cell | undefined
  const make = (shellId: string): Cell => {
    const dir = path.join(parent, `${++counter}-${shellId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64)}`)
    try {
      mkdirUnder(parent, dir)
    } catch (error) {
      // out of descendants, or the hierarchy went read-only: this shell is scanned instead
      process.emitWarning(`corral: cannot create cgroup ${dir} (${(error as Error).message}): this shell is contained by process scan`)
      return (fallback ??= procScanCell())
    }
    return {
      backend: "cgroup",
      cgroup: dir,
      reportsExit: false,
      reaper: false,
      // named corral: sh names itself in what it says (`corral: 1: exec: ./x: Exec format error`), not by the cell's path
      wrap: (file, args) => ["/bin/sh", ["-c", joinThenExec, "corral", dir, file, ...args]],
      release: () => CellRelease.unsafeRelease(dir, table)
    }
  }
  return (shellId: string) => Effect.sync(() => make(shellId))
}

/**
 * A supervisor in another PID namespace cannot tell whether this one lives,
 * so it removes this one's parent cgroup whenever it is empty (see
 * `reapLeftovers`): made again here, it costs nothing but a mkdir.
 */
const mkdirUnder = (parent: string, dir: string) => {
  try {
    fs.mkdirSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error
    fs.mkdirSync(parent, { recursive: true })
    fs.mkdirSync(dir)
  }
}

const uid = process.getuid?.() ?? 0

/**
 * The init: PID 1 of a pidns shell's namespace, and procScan's leader. The
 * user's command must not be PID 1: it would ignore every signal it has no
 * handler for, SIGTERM included. This init forks the command, says
 * `forked` on its report channel (kept from the command) once the command's
 * process exists, so a stop's group signal cannot come before it, reports
 * the command's wait status there the moment it exits, and reaps
 * everything until nothing is left, so what the command left behind
 * lingers as it would without it, and corral's own stop decides its end.
 * It installs no handler. Once the command is forked (with every signal at
 * its default, as Node spawns a child), it ignores the signals that would
 * end it, which a namespace's PID 1 is spared anyway, before it says
 * `forked`, and no group signal of corral's comes sooner: a group signal
 * reaches the command directly, once. It lets go of its stdin, stdout and
 * stderr then, so the command's pipes end when the command's processes are
 * done with them, not when the init is.
 *
 * Its first argument names the channel: `3`, the pipe on fd 3, or the path
 * of a unix socket to connect to (a shell on a terminal, ADR 22), or nothing
 * (an empty argument). The socket
 * is made with the builtins and Linux's numbers (AF_UNIX 1, SOCK_STREAM 1):
 * loading Socket.pm would double the init's start. Perl makes it
 * close-on-exec. Without a channel, the init runs the command all the same.
 * Its second is prctl's syscall number, or nothing: with it, the init makes
 * itself a child subreaper (`PR_SET_CHILD_SUBREAPER`, 36), so what the
 * command orphans becomes its child, not PID 1's (procScan, ADR 58).
 */
const init = [
  "use Fcntl;",
  "my $to = shift @ARGV; my $prctl = shift @ARGV; my $report;",
  'if ($prctl ne "") { syscall($prctl, 36, 1, 0, 0, 0) }',
  'if ($to eq "3") { if (open($report, ">&=", 3)) { fcntl($report, F_SETFD, FD_CLOEXEC) } }',
  'elsif ($to ne "") { socket($report, 1, 1, 0) && connect($report, pack("S Z*", 1, $to)) or undef $report }',
  "my $cmd = fork;",
  'defined $cmd or do { print STDERR "corral: cannot fork: $!\\n"; exit 125 };',
  'if ($cmd == 0) { exec { $ARGV[0] } @ARGV; print STDERR "corral: cannot run $ARGV[0]: $!\\n"; exit($!{ENOENT} ? 127 : 126) }',
  'for (grep { exists $SIG{$_} } qw(HUP INT QUIT ABRT USR1 USR2 PIPE ALRM TERM STKFLT VTALRM PROF IO PWR XCPU XFSZ TSTP TTIN TTOU)) { $SIG{$_} = "IGNORE" }',
  'open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");',
  'if ($report) { syswrite($report, "forked\\n") }',
  "my $status = 0;",
  'while ((my $w = waitpid(-1, 0)) > 0) { if ($w == $cmd) { $status = $?; if ($report) { syswrite($report, "$status\\n"); close($report) } } }',
  "exit($status & 127 ? 128 + ($status & 127) : $status >> 8);"
].join(" ")

/**
 * A program the cell itself runs, found once along the supervisor's own
 * PATH (its absolute entries): never along a shell's, which the caller of
 * a start chooses, and whose own `unshare` would hold nothing.
 */
const ownTool = (name: string) => Executable.locate(name, toolPath(), undefined)

const toolPath = () => (process.env.PATH ?? "").split(":").filter((dir) => path.isAbsolute(dir)).join(":") || "/usr/local/bin:/usr/bin:/bin"

/**
 * `unshare` makes the namespace and stays outside as the shell's leader: it
 * ignores SIGTERM and waits for the init, and `--kill-child` kills the init
 * (and so the namespace) if the leader dies. Root needs no user namespace;
 * anyone else gets one that maps only their own uid, so they keep exactly
 * their own permissions inside.
 */
const pidnsCell = Effect.gen(function*() {
  const unavailable = (reason: string) => new ContainmentUnavailable({ backend: "pidns", reason })
  const base = ["--pid", "--fork", "--mount-proc", "--kill-child"]
  const flags = uid === 0 ? base : ["--user", "--map-current-user", ...base]
  const unshare = ownTool("unshare")
  if (typeof unshare !== "string") return yield* unavailable(`unshare (util-linux) cannot be run (${unshare.missing} along ${toolPath()})`)
  const perl = ownTool("perl")
  if (typeof perl !== "string") return yield* unavailable(`perl cannot be run (${perl.missing} along ${toolPath()})`)
  const probe = spawnSync(unshare, [...flags, perl, "-e", "exit 0"], { stdio: "ignore" })
  if (probe.status !== 0) {
    return yield* unavailable(
      probe.error !== undefined
        ? `${unshare} cannot be run (${probe.error.message})`
        : `${unshare} ${flags.join(" ")} perl failed (exit ${probe.status}): user namespaces may be disabled`
    )
  }
  const cell: Cell = {
    backend: "pidns",
    cgroup: undefined,
    reportsExit: true,
    reaper: false,
    wrap: (file, args, report = "3") => [unshare, [...flags, perl, "-e", init, report, "", file, ...args]],
    release: nothingToRelease
  }
  return (_shellId: string) => Effect.succeed(cell)
})

const PARENT = /^corral-(\d+)-(\d+)-(\d+)-(\d+)-[0-9a-f]+$/

/**
 * This supervisor's parent cgroup, under its own cgroup so that a nested
 * corral stays inside the outer shell's. Its name says whose it is (uid, PID
 * namespace, pid, start time), so leftovers of a dead supervisor can be told
 * from a live one's and reaped. Removed when the layer is released.
 */
const cgroupParent = Effect.gen(function*() {
  const unavailable = (reason: string) => new ContainmentUnavailable({ backend: "cgroup", reason })
  const mount = Cgroup.mountPoint()
  if (mount === undefined) return yield* unavailable("no cgroup2 hierarchy is mounted (see /proc/self/mountinfo)")
  const own = Cgroup.ownPath()
  if (own === undefined) return yield* unavailable("this process's cgroup v2 path is unknown (no 0:: line in /proc/self/cgroup)")
  const home = path.join(mount, own)
  const table = yield* ProcessTable
  const self = yield* table.lookup(process.pid)
  const name = `corral-${uid}-${pidNamespace()}-${process.pid}-${Option.match(self, { onNone: () => 0, onSome: (p) => p.startTime })}-${randomBytes(3).toString("hex")}`
  const parent = path.join(home, name)
  return yield* Effect.acquireRelease(
    Effect.try({
      try: () => {
        fs.mkdirSync(parent)
        // moving a process needs write access to the common ancestor's cgroup.procs too
        fs.accessSync(path.join(home, "cgroup.procs"), fs.constants.W_OK)
        fs.accessSync(path.join(parent, "cgroup.procs"), fs.constants.W_OK)
        return { home, parent, table }
      },
      catch: (error) => {
        Cgroup.remove(parent)
        return unavailable(`cannot create and join a cgroup under ${home} (${(error as Error).message}); ` +
          `as a non-root user, run corral in a delegated subtree (systemd-run --user --scope)`)
      }
    }),
    ({ parent }) => Effect.sync(() => Cgroup.remove(parent))
  )
})

/** The inode of this process's PID namespace: pids mean something only within it. */
const pidNamespace = (): number => {
  try {
    return Number(/\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))?.[1] ?? 0)
  } catch {
    return 0
  }
}

/** How old an empty cgroup of another PID namespace must be to be removed. */
const FOREIGN_MIN_AGE_MS = 60_000

/**
 * Stops and removes what supervisors of this uid and PID namespace left in
 * their cgroups when they died. Those of another namespace (gone with it, or
 * alive: their pids mean nothing here) are only removed where empty: rmdir
 * refuses a cgroup with a process in it, a young one may be a cell about to
 * be joined, and a live owner makes its parent again at its next shell.
 */
const reapLeftovers = (home: string) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const ns = pidNamespace()
    for (const dir of Cgroup.subdirs(home)) {
      const m = PARENT.exec(path.basename(dir))
      if (m === null || Number(m[1]) !== uid) continue
      if (Number(m[2]) !== ns) {
        Cgroup.removeStale(dir, FOREIGN_MIN_AGE_MS)
        continue
      }
      const owner = yield* table.lookup(Number(m[3]))
      if (Option.exists(owner, (p) => p.startTime === Number(m[4]) && !isGone(p))) continue
      const shells = Cgroup.subdirs(dir).filter((shell) => Cgroup.populated(shell))
      if (shells.length > 0) {
        yield* GroupStop.stopGroups(shells.map((cgroup) => ({ pgid: 0, sid: 0, startTime: 0, cgroup })))
        yield* Effect.logWarning(`reaped ${shells.length} shell cgroup(s) left by dead supervisor pid ${m[3]}: ${shells.join(", ")}`)
      }
      Cgroup.remove(dir)
    }
  })

export class Containment extends Context.Tag("@corral/core/Containment")<Containment, {
  readonly backend: Backend
  /**
   * The cgroup every cgroup cell is made in (the cgroup backend's), so that a
   * watcher told of it stops a new shell however early its supervisor dies.
   */
  readonly cells: string | undefined
  /** A cell for a new shell; its `release` removes it. */
  readonly cell: (shellId: string) => Effect.Effect<Cell>
  /** Stops shells together: TERM, the grace, the kill loop. Any target, whichever backend made it. */
  readonly stop: (targets: ReadonlyArray<StopTarget>, options?: StopOptions) => Effect.Effect<ReadonlyArray<StopReport>>
  /** How many of the shell's own processes are alive now: not the containment's (a PID namespace's `unshare` and init). */
  readonly members: (target: StopTarget) => Effect.Effect<number>
  /**
   * Stops and removes what dead supervisors of this user and PID namespace
   * left in their cgroups. Run it after reaping their journals, which say
   * more about what they left.
   */
  readonly reapLeftovers: Effect.Effect<void>
}>() {
  static readonly layerProcScan: Layer.Layer<Containment, never, ProcessTable | Limits> = Layer.effect(
    Containment,
    Effect.suspend(() => {
      const cell = procScanCell()
      return make("procScan", () => Effect.succeed(cell), Effect.void)
    })
  )

  static readonly layerPidns: Layer.Layer<Containment, ContainmentUnavailable, ProcessTable | Limits> = Layer.effect(
    Containment,
    Effect.flatMap(pidnsCell, (cell) => make("pidns", cell, Effect.void))
  )

  static readonly layerCgroup: Layer.Layer<Containment, ContainmentUnavailable, ProcessTable | Limits> = Layer.scoped(
    Containment,
    Effect.flatMap(cgroupParent, ({ home, parent, table }) => make("cgroup", cgroupCell(parent, table), reapLeftovers(home), parent))
  )

  /**
   * The scripted-table backend for TestClock tests: procScan over whatever
   * `ProcessTable` is provided, its command the leader (no init to script).
   */
  static readonly layerTest: Layer.Layer<Containment, never, ProcessTable | Limits> = Layer.effect(
    Containment,
    make("procScan", () => Effect.succeed(bareProcScanCell), Effect.void)
  )

  /** `CORRAL_CONTAINMENT` (`auto`, `cgroup`, `pidns` or `procScan`; default `auto`), or `choice` when given. */
  static readonly layer = (
    choice?: Backend | "auto"
  ): Layer.Layer<Containment, ContainmentUnavailable | ConfigError.ConfigError, ProcessTable | Limits> =>
    Layer.unwrapEffect(Effect.flatMap(
      choice === undefined ? backendConfig : Effect.succeed(choice),
      (backend) => Effect.as(descriptorsToSetUp(backend), Containment.layerOf(backend))
    ))

  /** The layer of one choice, without the check of `layer` that the process can set it up. */
  private static readonly layerOf = (backend: Backend | "auto") =>
    backend === "cgroup"
      ? Containment.layerCgroup
      : backend === "pidns"
      ? Containment.layerPidns
      : backend === "procScan"
      ? Containment.layerProcScan
      : Containment.layerCgroup.pipe(
        Layer.catchAll(() => Containment.layerPidns),
        Layer.catchAll(() => Containment.layerProcScan)
      )
}

export const backendConfig: Config.Config<Backend | "auto"> = Config.literal("auto", ...backends)("CORRAL_CONTAINMENT").pipe(
  Config.withDefault("auto" as const)
)
