/**
 * `corral run` end to end: the built bin as a real child process, real
 * commands, real signals, and /proc read directly to see what is left.
 * Where GNU timeout is installed, each of its documented behaviours is run
 * with `timeout` and `corral run` side by side.
 */
import { spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { constants } from "node:os"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as GnuDuration from "../src/internal/gnuDuration.js"
import * as Signals from "../src/internal/signals.js"

const bin = fileURLToPath(new URL("../bin/corral.js", import.meta.url))
const notExecutable = fileURLToPath(new URL("fixtures/not-executable.sh", import.meta.url))

/**
 * On the machines corral is built on PID 1 never reaps, so a grandchild
 * killed outside a PID namespace stays a zombie until reboot. `npm test`
 * runs the suite in a namespace of its own.
 */
const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"
const orphaning = inPidNamespace ? describe : describe.skip

interface Finished {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: Buffer
  readonly stderr: string
}

/** Live processes carrying the shell id, found through /proc alone. */
const carrying = (shellId: string): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      // a zombie's environment reads as empty
      return fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(`CORRAL_SHELL_ID=${shellId}`)
    } catch {
      return false
    }
  })

/** Kills whatever a failed test left behind: only processes carrying our own tag. */
const killCarrying = (shellId: string) =>
  Effect.sync(() => {
    for (const pid of carrying(shellId)) if (pid > 1) process.kill(pid, "SIGKILL")
  })

/** Starts `corral ARGS`; corral is killed when the scope closes if still running. */
const corral = (args: ReadonlyArray<string>, stdin: Uint8Array = new Uint8Array()) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [bin, ...args], { stdio: "pipe" })),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    const firstLine = yield* Deferred.make<string>()
    const exited = yield* Deferred.make<Pick<Finished, "code" | "signal">>()
    const closed = yield* Deferred.make<void>()
    child.stdout.on("data", (bytes: Buffer) => {
      stdout.push(bytes)
      const text = Buffer.concat(stdout).toString()
      if (text.includes("\n")) Deferred.unsafeDone(firstLine, Effect.succeed(text.slice(0, text.indexOf("\n"))))
    })
    child.stderr.on("data", (bytes: Buffer) => stderr.push(bytes))
    child.once("exit", (code, signal) => Deferred.unsafeDone(exited, Effect.succeed({ code, signal })))
    child.once("close", () => Deferred.unsafeDone(closed, Effect.void))
    child.stdin.on("error", () => {}) // CMD may exit without reading its stdin
    child.stdin.end(stdin)
    /** The shell id CMD printed as its first line, with a finalizer that removes what a failed test left. */
    const shellId = Deferred.await(firstLine).pipe(
      Effect.tap((id) => expect(id).toMatch(/^corral-[0-9a-f]+$/)),
      Effect.tap((id) => Effect.addFinalizer(() => killCarrying(id)))
    )
    const finished = Effect.gen(function*() {
      const status = yield* Deferred.await(exited)
      // the pipes close once nothing holds them: a leftover process would keep them open
      yield* Deferred.await(closed).pipe(Effect.timeoutFail({
        duration: "2 seconds",
        onTimeout: () => new Error("corral exited but something still holds its stdout or stderr")
      }))
      return { ...status, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr).toString() }
    })
    return { pid: child.pid!, shellId, finished, signal: (signal: NodeJS.Signals) => Effect.sync(() => child.kill(signal)) }
  })

const corralRun = (args: ReadonlyArray<string>, stdin?: Uint8Array) => corral(["run", ...args], stdin)

/** A process's one-letter state (R, S, T, Z...), or "" once it is gone. */
const stateOf = (pid: number): string => {
  try {
    return /\) (\S)/.exec(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))?.[1] ?? ""
  } catch {
    return ""
  }
}

/** Polls `condition` every 20 ms for up to 5 s. */
const until = (what: string, condition: () => boolean): Effect.Effect<void, Error> =>
  Effect.suspend(() => (condition() ? Effect.void : Effect.fail(new Error(`${what}: not yet`)))).pipe(
    Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 })
  )

const runToEnd = (args: ReadonlyArray<string>, stdin?: Uint8Array) =>
  Effect.flatMap(corralRun(args, stdin), (run) => run.finished)

const corralToEnd = (args: ReadonlyArray<string>) => Effect.flatMap(corral(args), (run) => run.finished)

const printId = "echo \"$CORRAL_SHELL_ID\""

describe("corral", () => {
  it.scopedLive("lists every command with no arguments, help or --help", () =>
    Effect.gen(function*() {
      for (const args of [[], ["help"], ["--help"]]) {
        const result = yield* corralToEnd(args)
        expect(result.code).toBe(0)
        for (const command of ["run", "mcp", "ls", "show", "logs", "stop", "top"]) {
          expect(result.stdout.toString()).toContain(`\n  corral ${command}`)
        }
      }
    }))

  it.scopedLive("prints the package's version with --version", () =>
    Effect.gen(function*() {
      const { version } = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"))
      expect((yield* corralToEnd(["--version"])).stdout.toString()).toBe(`${version}\n`)
    }))

  it.scopedLive("exits 125 with one line naming an unknown command", () =>
    Effect.gen(function*() {
      const result = yield* corralToEnd(["frobnicate"])
      expect(result.code).toBe(125)
      expect(result.stderr).toBe("corral: unknown command \"frobnicate\": run `corral --help` for the commands\n")
    }))

  it.scopedLive("passes `help COMMAND` on as `COMMAND --help`", () =>
    Effect.gen(function*() {
      const result = yield* corralToEnd(["help", "run"])
      expect(result.code).toBe(0)
      expect(result.stdout.toString()).toMatch(/^usage: corral run /)
    }))
})

describe("corral run: exit status", () => {
  it.scopedLive("is CMD's own code", () =>
    Effect.gen(function*() {
      expect((yield* runToEnd(["true"])).code).toBe(0)
      expect((yield* runToEnd(["--", "sh", "-c", "exit 3"])).code).toBe(3)
    }))

  it.scopedLive("is CMD's death by signal N: corral dies of N too (a shell sees 128+N)", () =>
    Effect.gen(function*() {
      expect((yield* runToEnd(["sh", "-c", "kill -s KILL $$"])).signal).toBe("SIGKILL")
      expect((yield* runToEnd(["sh", "-c", "kill -s TERM $$"])).signal).toBe("SIGTERM")
      expect((yield* runToEnd(["sh", "-c", "kill -s PIPE $$"])).signal).toBe("SIGPIPE")
    }))

  it.scopedLive("is 128+N, not a death, for a signal whose death would dump core (Node cannot turn dumps off)", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["sh", "-c", "kill -s QUIT $$"])
      expect([result.code, result.signal]).toEqual([128 + 3, null])
    }))

  it.scopedLive("is 124 when CMD times out", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--timeout", "300ms", "sh", "-c", `${printId}; exec sleep 30`])
      const shellId = yield* run.shellId
      expect((yield* run.finished).code).toBe(124)
      expect(carrying(shellId)).toEqual([])
    }))

  it.scopedLive("is 126 with a message when CMD is not executable", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd([notExecutable])
      expect(result.code).toBe(126)
      expect(result.stderr).toBe(`corral: cannot run ${notExecutable}: permission denied: check that it is executable\n`)
    }))

  it.scopedLive("is 126 with a message naming what is wrong with a path that cannot be run: a directory, a link loop, a name too long, a file as a directory", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(`${os.tmpdir()}/corral-paths-`)),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      fs.symlinkSync(`${dir}/loop-b`, `${dir}/loop-a`)
      fs.symlinkSync(`${dir}/loop-a`, `${dir}/loop-b`)
      fs.writeFileSync(`${dir}/file`, "")
      const long = `${dir}/${"a".repeat(300)}`
      for (
        const [path, reason] of [
          [dir, "it is a directory: pass a program or a script"],
          [`${dir}/loop-a`, "too many levels of symbolic links (ELOOP): fix the link"],
          [long, "the name is too long (ENAMETOOLONG): pass a shorter path"],
          [`${dir}/file/x`, "a part of the path is not a directory (ENOTDIR): check the path"]
        ]
      ) {
        const result = yield* runToEnd([path!])
        expect([result.code, result.stderr]).toEqual([126, `corral: cannot run ${path}: ${reason}\n`])
      }
    }))

  it.scopedLive("a CMD that its shell cannot exec is named by its path in what the shell says, not by corral's cell", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(`${os.tmpdir()}/corral-noexec-`)),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      // an ELF header and nothing else: the kernel refuses it (ENOEXEC), and no shell can read it
      fs.writeFileSync(`${dir}/not-a-program`, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), { mode: 0o755 })
      const result = yield* runToEnd([`${dir}/not-a-program`])
      expect([126, 127]).toContain(result.code)
      expect(result.stderr).toContain(`${dir}/not-a-program`)
      expect(result.stderr).not.toMatch(/cgroup|corral-\d+-\d+/)
    }))

  it.scopedLive("is 127 with a message when CMD is not found", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["corral-test-no-such-command"])
      expect(result.code).toBe(127)
      expect(result.stderr).toBe("corral: cannot run corral-test-no-such-command: not found: check the name and PATH\n")
    }))
})

/** `corral run ARGS` under `ulimit -n limit`, to its end. */
const runWithDescriptorLimit = (limit: number, args: ReadonlyArray<string>) =>
  Effect.async<Finished>((resume) => {
    const child = spawn("sh", ["-c", `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, bin, "run", ...args], { stdio: ["ignore", "pipe", "pipe"] })
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    child.stdout.on("data", (bytes: Buffer) => stdout.push(bytes))
    child.stderr.on("data", (bytes: Buffer) => stderr.push(bytes))
    child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr).toString() })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("corral run: out of file descriptors", () => {
  it.live("at every `ulimit -n` where Node can load it, runs CMD or says in one line which limit to raise: never an internal error or a crash", () =>
    Effect.gen(function*() {
      const outcomes: Array<string> = []
      for (let limit = 16; limit <= 40; limit++) {
        const result = yield* runWithDescriptorLimit(limit, ["--", "sh", "-c", "echo ok"])
        const lines = result.stderr.split("\n").filter((line) => line !== "")
        const what = `ulimit -n ${limit}: ${result.signal ?? result.code}\n${result.stderr}`
        // below some limit Node itself cannot start, or read the bin: none of corral's code has run
        if (result.code !== 0 && !result.stderr.includes("corral: ") && !result.stderr.includes("bundle/")) {
          expect(result.stdout.toString(), what).toBe("")
          outcomes.push("node")
          continue
        }
        expect(result.signal, what).toBeNull()
        expect(lines.every((line) => line.startsWith("corral: ")), what).toBe(true)
        const warnings = lines.filter((line) => line.startsWith("corral: warning: "))
        expect(warnings, what).toEqual(warnings.length === 0 ? [] : [expect.stringMatching(/^corral: warning: the watcher could not start: .*\(EMFILE: `ulimit -n` is reached\)/)])
        const errors = lines.filter((line) => !line.startsWith("corral: warning: "))
        if (result.code === 0) {
          expect([result.stdout.toString(), errors], what).toEqual(["ok\n", []])
          outcomes.push(warnings.length === 0 ? "ran" : "ran unwatched")
        } else {
          expect([125, 126], what).toContain(result.code)
          expect(errors, what).toHaveLength(1)
          expect(errors[0], what).toMatch(/no file descriptor left .*\(EMFILE.*`ulimit -n`/)
          outcomes.push("refused")
        }
      }
      // the sweep crossed the range where corral's own code meets the limit
      expect(outcomes, outcomes.join(" ")).toContain("refused")
      expect(outcomes.at(-1)).toBe("ran")
    }))
})

describe("corral run: usage", () => {
  const rejects = (args: ReadonlyArray<string>, message: RegExp) =>
    Effect.gen(function*() {
      const result = yield* runToEnd(args)
      expect(result.code).toBe(125)
      expect(result.stderr).toMatch(message)
      expect(result.stderr.split("\n")).toHaveLength(2) // one line, newline-terminated
    })

  it.scopedLive("exits 125 with one line naming what is wrong", () =>
    Effect.gen(function*() {
      yield* rejects([], /^corral: no command to run: put it after the options/)
      yield* rejects(["--timeout", "5s"], /^corral: no command to run/)
      yield* rejects(["--timeout"], /^corral: --timeout needs a duration, like --timeout 30s/)
      yield* rejects(["--timeout", "--", "true"], /^corral: --timeout needs a duration/)
      yield* rejects(["--timeout", "soon", "true"], /^corral: --timeout: invalid duration "soon": use a number/)
      yield* rejects(["--containment", "jail", "true"], /^corral: --containment must be one of auto, cgroup, pidns, procScan; got "jail"/)
      yield* rejects(["--grace=-1", "true"], /^corral: --grace: invalid duration "-1"/)
      yield* rejects(["--verbose=yes", "true"], /^corral: --verbose takes no value/)
      yield* rejects(["--color", "true"], /^corral: unknown option --color for run/)
      yield* rejects(["-x", "true"], /^corral: unknown option -x for run/)
      yield* rejects(["-s", "FOO", "1", "true"], /^corral: -s: invalid signal "FOO": use a name like TERM/)
      yield* rejects(["--signal=65", "1", "true"], /^corral: --signal: invalid signal "65"/)
      yield* rejects(["-s"], /^corral: -s needs a signal, like -s INT/)
      yield* rejects(["-k", "soon", "1", "true"], /^corral: -k: invalid duration "soon"/)
      yield* rejects(["--kill=1x", "1", "true"], /^corral: --kill-after: invalid duration "1x"/)
      yield* rejects(["1x", "true"], /^corral: invalid duration "1x": .*; no command is named "1x" either$/m)
      yield* rejects(["soon", "true"], /^corral: invalid duration "soon"/)
      yield* rejects(["--", "-1", "true"], /^corral: invalid duration "-1"/)
      yield* rejects(["5"], /^corral: no command to run/)
      yield* rejects(["--foreground", "--containment", "procScan", "1", "true"], /^corral: --foreground keeps CMD in corral's own group, which no containment holds/)
    }))

  it.scopedLive("reads a first word that is a duration as DURATION, and runs a command without one", () =>
    Effect.gen(function*() {
      expect((yield* runToEnd(["0.2", "sleep", "10"])).code).toBe(124)
      expect((yield* runToEnd(["--", "0.2", "sleep", "10"])).code).toBe(124)
      expect((yield* runToEnd(["-v", "0.2s", "sleep", "10"])).code).toBe(124)
      // with --timeout, the next word is CMD whatever it looks like
      expect((yield* runToEnd(["--timeout", "0", "10"])).code).toBe(127)
      // a missing command not followed by a program is a missing command
      expect((yield* runToEnd(["corral-test-no-such-command", "arg"])).code).toBe(127)
    }))

  it.scopedLive("takes GNU getopt forms: clustered short options, attached values, unique long prefixes", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["-vpsINT", "--kill=5", "--time=0.2", "sleep", "10"])
      expect(result.code).toBe(128 + 2)
      expect(result.stderr).toMatch(/^corral: timed out after 200ms: stopping group \d+ with SIGINT\n/)
    }))

  it.scopedLive("takes everything after the options as CMD, with or without --", () =>
    Effect.gen(function*() {
      const bare = yield* runToEnd(["sh", "-c", "printf '%s ' \"$@\"", "sh", "--timeout", "-x", "--"])
      expect(bare.stdout.toString()).toBe("--timeout -x -- ")
      const dashed = yield* runToEnd(["--timeout", "5s", "--", "sh", "-c", "exit 4"])
      expect(dashed.code).toBe(4)
    }))

  it.scopedLive("prints its help on stdout with --help", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["--help"])
      expect(result.code).toBe(0)
      expect(result.stdout.toString()).toMatch(/^usage: corral run \[OPTION\]\.\.\. \[DURATION\] CMD \[ARG\]\.\.\./)
    }))
})

describe("corral run: passthrough", () => {
  it.scopedLive("passes binary stdin through byte for byte", () =>
    Effect.gen(function*() {
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
      const input = Buffer.concat([every, randomBytes(1 << 20), every])
      const result = yield* runToEnd(["cat"], input)
      expect(result.code).toBe(0)
      expect(result.stdout.equals(input)).toBe(true)
    }))

  it.scopedLive("passes stdout and stderr through unchanged", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["sh", "-c", "printf 'out\\0\\377\\n'; printf 'err\\nline' >&2"])
      expect(result.stdout.equals(Buffer.from("out\0\xff\n", "latin1"))).toBe(true)
      expect(result.stderr).toBe("err\nline")
    }))
})

describe("corral run: signals sent to corral", () => {
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2"] as const) {
    it.scopedLive(`${signal} is passed on to CMD, and corral dies of it as CMD did`, () =>
      Effect.gen(function*() {
        const run = yield* corralRun(["sh", "-c", `${printId}; exec sleep 30`])
        const shellId = yield* run.shellId
        yield* run.signal(signal)
        expect((yield* run.finished).signal).toBe(signal)
        expect(carrying(shellId)).toEqual([])
      }))
  }

  it.scopedLive("SIGINT reaches CMD, which may exit on its own terms", () =>
    Effect.gen(function*() {
      const script = "process.on('SIGINT', () => process.exit(7)); console.log(process.env.CORRAL_SHELL_ID); setInterval(() => {}, 1000)"
      const run = yield* corralRun([process.execPath, "-e", script])
      const shellId = yield* run.shellId
      yield* run.signal("SIGINT")
      expect((yield* run.finished).code).toBe(7)
      expect(carrying(shellId)).toEqual([])
    }))

  it.scopedLive("a signal passed on is not a stop: a CMD that ignores it keeps running, as under timeout(1)", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--verbose", "sh", "-c", `trap '' HUP; ${printId}; exec sleep 30`])
      const shellId = yield* run.shellId
      yield* run.signal("SIGHUP")
      yield* Effect.sleep("500 millis")
      expect(carrying(shellId)).not.toEqual([])
      yield* run.signal("SIGTERM")
      const result = yield* run.finished
      expect(result.signal).toBe("SIGTERM")
      expect(result.stderr).toMatch(/^corral: received SIGHUP: passing it on to group (\d+)\ncorral: received SIGTERM: passing it on to group \1\n/)
    }))

  it.scopedLive("with --grace (or -k), a CMD still running that long after a signal passed on is killed", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--grace", "200ms", "--verbose", "sh", "-c", `trap '' HUP; ${printId}; exec sleep 30`])
      const shellId = yield* run.shellId
      yield* run.signal("SIGHUP")
      const result = yield* run.finished
      expect(result.signal).toBe("SIGKILL")
      expect(result.stderr).toMatch(/^corral: received SIGHUP: passing it on to group (\d+)\ncorral: 200ms after SIGHUP, CMD still runs: killing group \1\n/)
      expect(result.stderr).toMatch(/corral: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: (?:SIGKILL sufficed,|escalated to SIGKILL for 1 of) 1 process\n$/)
      expect(carrying(shellId)).toEqual([])
    }))

  it.scopedLive("SIGWINCH is passed on (CMD's session has no terminal to send it), and is no reason to stop", () =>
    Effect.gen(function*() {
      // a foreground sleep, so nothing is orphaned: the trap runs when it ends
      const run = yield* corralRun(["sh", "-c", `trap 'echo resized; exit 5' WINCH; ${printId}; while :; do sleep 0.1; done`])
      yield* run.shellId
      yield* run.signal("SIGWINCH")
      const result = yield* run.finished
      expect(result.code).toBe(5)
      expect(result.stdout.toString()).toMatch(/\nresized\n$/)
    }))

  it.scopedLive("SIGTSTP suspends CMD's group, then corral, as one job; SIGCONT resumes both (at a terminal, timeout(1) and CMD share a group that gets both: not compared)", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--verbose", "sh", "-c", `${printId}; exec sleep 30`])
      const shellId = yield* run.shellId
      const all = () => [run.pid, ...carrying(shellId)]
      yield* run.signal("SIGTSTP")
      yield* until("corral and CMD stopped", () => all().every((pid) => stateOf(pid) === "T"))
      yield* run.signal("SIGCONT")
      yield* until("corral and CMD running again", () => all().every((pid) => stateOf(pid) === "S" || stateOf(pid) === "R"))
      yield* run.signal("SIGTERM")
      const result = yield* run.finished
      expect(result.signal).toBe("SIGTERM")
      expect(result.stderr).toMatch(/^corral: received SIGTSTP: suspending group \d+ and corral\n/)
    }))

  it.scopedLive("SIGALRM times CMD out, as it does timeout(1)", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--verbose", "sh", "-c", `${printId}; exec sleep 30`])
      yield* run.shellId
      yield* run.signal("SIGALRM")
      const result = yield* run.finished
      expect(result.code).toBe(124)
      expect(result.stderr).toMatch(/^corral: received SIGALRM: stopping group \d+\n/)
    }))
})

describe("corral run: --verbose", () => {
  it.scopedLive("reports the timeout and the stop on stderr, one line each", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["--verbose", "--timeout", "200ms", "sleep", "30"])
      expect(result.code).toBe(124)
      expect(result.stderr).toMatch(
        /^corral: timed out after 200ms: stopping group (\d+)\ncorral: stopped group \1 \((?:cgroup|pidns|procScan)\) in \d+ms: SIGTERM sufficed, 1 process\n$/
      )
    }))

  it.scopedLive("says so when CMD left nothing behind", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["-v", "true"])
      expect(result.stderr).toMatch(/^corral: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: nothing was left running\n$/)
    }))
})

orphaning("corral run: whole groups (orphans processes, so needs the PID namespace of `npm test`)", () => {
  it.scopedLive("a timeout stops a TERM-ignoring group with SIGKILL after --grace", () =>
    Effect.gen(function*() {
      const run = yield* corralRun([
        "--timeout", "300ms", "--grace", "200ms", "--verbose",
        "sh", "-c", `trap '' TERM; ${printId}; sleep 30 & sleep 30`
      ])
      const shellId = yield* run.shellId
      const result = yield* run.finished
      // the leader needed SIGKILL: 128+9, as timeout(1) reports it
      expect(result.code).toBe(137)
      expect(result.stderr).toMatch(/corral: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: escalated to SIGKILL for \d+ of 3 processes\n$/)
      expect(carrying(shellId)).toEqual([])
    }))

  it.scopedLive("a background child CMD leaves behind is stopped, and CMD's status kept", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--verbose", "sh", "-c", `${printId}; sleep 30 & exit 0`])
      const shellId = yield* run.shellId
      const result = yield* run.finished
      expect(result.code).toBe(0)
      expect(result.stderr).toMatch(/^corral: stopped group \d+ \((?:cgroup|pidns|procScan)\) in \d+ms: SIGTERM sufficed, 1 process\n$/)
      expect(carrying(shellId)).toEqual([])
    }))

  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    it.scopedLive(`${signal} to corral stops every process of the group`, () =>
      Effect.gen(function*() {
        // dash starts background jobs with SIGINT ignored: the stop must still end them
        const run = yield* corralRun(["sh", "-c", `${printId}; sleep 30 & sleep 30 & wait`])
        const shellId = yield* run.shellId
        yield* run.signal(signal)
        expect((yield* run.finished).signal).toBe(signal)
        expect(carrying(shellId)).toEqual([])
      }))
  }
})

describe("corral run: durations, as GNU timeout reads them", () => {
  // coreutils' tests/timeout/*.sh and NEWS: what each one means to timeout(1)
  const cases: ReadonlyArray<readonly [string, number | "invalid"]> = [
    ["0", 0],
    ["-0", 0],
    [".1", 0.1],
    ["+0.1", 0.1],
    [" 0.1", 0.1],
    ["1.", 1],
    ["10.34", 10.34],
    ["9.999999999", 9.999999999],
    ["1e3", 1000],
    ["1E-1", 0.1],
    ["0x10", 16],
    ["0x1p-3", 0.125],
    ["0X.8P1", 1],
    ["1s", 1],
    ["1.5m", 90],
    ["2h", 7200],
    ["1d", 86_400],
    ["2.34e+5d", 2.34e5 * 86_400],
    ["500ms", 0.5],
    ["1e-10000", 1e-9],
    ["9223372036854775808d", 9223372036854775808 * 86_400],
    ["1.18e+4932", Infinity],
    ["inf", Infinity],
    ["INFINITYd", Infinity],
    ["invalid", "invalid"],
    [" -0.1", "invalid"],
    ["-1", "invalid"],
    ["-1e-10000", "invalid"],
    ["-inf", "invalid"],
    ["nan", "invalid"],
    ["0.1 ", "invalid"],
    ["42D", "invalid"],
    ["1x", "invalid"],
    ["1e", "invalid"],
    ["1e+", "invalid"],
    ["0x", "invalid"],
    ["0x1p", "invalid"],
    [".", "invalid"],
    ["1,5", "invalid"],
    ["1.5.5", "invalid"],
    ["", "invalid"]
  ]
  it("reads each as coreutils' tests and NEWS say timeout(1) does", () => {
    for (const [input, seconds] of cases) {
      const parsed = GnuDuration.parseSeconds(input)
      expect([input, Either.isRight(parsed) ? parsed.right : "invalid"]).toEqual([input, seconds])
    }
  })

  it("never fires past any clock; a positive duration too small to represent still fires", () => {
    expect(GnuDuration.parse("1.18e+4932")).toEqual(Either.right(Option.some(Duration.infinity)))
    expect(GnuDuration.parse("9223372036854775808d")).toEqual(Either.right(Option.some(Duration.infinity)))
    expect(GnuDuration.parse("0")).toEqual(Either.right(Option.none()))
    const tiny = GnuDuration.parse("1e-10000")
    expect(Either.isRight(tiny) && Option.exists(tiny.right, (d) => Duration.toMillis(d) > 0)).toBe(true)
  })
})

describe("corral run: -s, as GNU timeout reads it", () => {
  it("takes names with or without SIG in any case, numbers (a shell's 128+N too) and real-time names", () => {
    const cases: ReadonlyArray<readonly [string, number | undefined]> = [
      ["TERM", 15], ["term", 15], ["SIGTERM", 15], ["sigterm", 15], ["SiGtErM", 15], ["15", 15], ["015", 15], ["SIG15", 15],
      ["0", 0], ["EXIT", 0], ["130", 2], ["271", 15], ["KILL", 9], ["CLD", 17], ["IOT", 6], ["POLL", 29], ["STKFLT", 16],
      ["RTMIN", 34], ["RTMIN+1", 35], ["rtmax-1", 63], ["RTMAX", 64], ["34", 34], ["64", 64],
      ["65", undefined], ["32", undefined], ["33", undefined], ["+15", undefined], [" 15", undefined], ["15x", undefined],
      ["-15", undefined], ["0x0f", undefined], ["1e1", undefined], ["", undefined], ["UNUSED", undefined], ["RTMIN-1", undefined],
      ["RTMAX+1", undefined], ["FOO", undefined]
    ]
    for (const [operand, signal] of cases) expect([operand, Signals.parse(operand)]).toEqual([operand, signal])
  })
})

/** GNU timeout's version, where it is installed. */
const gnuVersion: readonly [number, number] | undefined = (() => {
  const out = spawnSync("timeout", ["--version"], { encoding: "utf8" })
  const match = /coreutils\)? (\d+)\.(\d+)/.exec(out.stdout ?? "")
  return out.status === 0 && match !== null ? [Number(match[1]), Number(match[2])] : undefined
})()

interface Case {
  readonly title: string
  /** The words after `timeout` or `corral run`. */
  readonly args?: ReadonlyArray<string>
  /** Or a bash script running `$X` (`timeout` or `corral run`), with `$F` a file of its own. */
  readonly script?: string
  /** Sent to the wrapper once CMD has printed its first line. */
  readonly send?: NodeJS.Signals
  /** The status coreutils documents (its tests, NEWS and --help), as a shell sees it. */
  readonly status: number
  /** The coreutils release that brought the behaviour: an older installed timeout is not compared. */
  readonly since?: readonly [number, number]
  /** Also compare how each ended: the same code, or death by the same signal. */
  readonly sameEnd?: boolean
  /** What both must have done beyond the status. */
  readonly effect?: (result: Ran) => void
}

interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** As a shell sees it: the code, or 128+N for death by signal N. */
  readonly status: number
}

const newer = (a: readonly [number, number], b: readonly [number, number]) => a[0] > b[0] || (a[0] === b[0] && a[1] >= b[1])

const compared = (c: Case) => gnuVersion !== undefined && (c.since === undefined || newer(gnuVersion, c.since))

const titleOf = (c: Case) =>
  `${c.title} → ${c.status} ` + (gnuVersion === undefined
    ? "(GNU timeout is not installed: the documented value)"
    : compared(c)
    ? `(beside GNU timeout ${gnuVersion.join(".")})`
    : `(as coreutils ${c.since!.join(".")} documents it; the installed ${gnuVersion.join(".")} behaves otherwise and is not run)`)

/** How long GNU timeout is given after its command is up before it is signalled (see `runWith`). */
const REFERENCE_SETTLE = "100 millis"

/** Runs one wrapper on the case: `timeout`, or the bin run as a file (through its sh launcher) as a user's shell would. */
const runWith = (wrapper: ReadonlyArray<string>, c: Case) =>
  Effect.gen(function*() {
    const file = `${fs.mkdtempSync("/tmp/corral-run-test-")}/f`
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(file.slice(0, -2), { recursive: true, force: true })))
    const env = { ...process.env, X: wrapper.join(" "), F: file }
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        c.script !== undefined
          ? spawn("bash", ["-c", c.script], { env, stdio: ["ignore", "pipe", "pipe"] })
          : spawn(wrapper[0]!, [...wrapper.slice(1), ...c.args!], { env, stdio: ["ignore", "pipe", "pipe"] })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    const up = yield* Deferred.make<void>()
    child.stdout.on("data", (bytes: Buffer) => {
      stdout.push(bytes)
      if (Buffer.concat(stdout).includes("\n")) Deferred.unsafeDone(up, Effect.void)
    })
    child.stderr.on("data", (bytes: Buffer) => stderr.push(bytes))
    const exited = yield* Deferred.make<Pick<Ran, "code" | "signal">>()
    const closed = yield* Deferred.make<void>()
    child.once("exit", (code, signal) => Deferred.unsafeDone(exited, Effect.succeed({ code, signal })))
    child.once("close", () => Deferred.unsafeDone(closed, Effect.void))
    if (c.send !== undefined) {
      yield* Deferred.await(up)
      // GNU timeout's child can print before its parent's fork() has returned there, and a signal in
      // between finds no monitored pid: timeout then exits 128+SIGTERM at once (its cleanup(), "the child
      // is not exec'd yet"; seen once in CI: 143 for SIGALRM). The reference gets a moment to get there.
      if (wrapper[0] === "timeout") yield* Effect.sleep(REFERENCE_SETTLE)
      child.kill(c.send)
    }
    const { code, signal } = yield* Deferred.await(exited)
    // the output is complete once nothing holds the pipes; a wrapper that left CMD running must not hold the test
    yield* Effect.timeoutOption(Deferred.await(closed), "1 second")
    const status = code ?? 128 + constants.signals[signal!]
    return { code, signal, status, stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString() } satisfies Ran
  })

const sideBySide = (cases: ReadonlyArray<Case>) => {
  for (const c of cases) {
    it.scopedLive(titleOf(c), () =>
      Effect.gen(function*() {
        const [ours, theirs] = yield* Effect.all([
          runWith([bin, "run"], c),
          compared(c) ? Effect.asSome(runWith(["timeout"], c)) : Effect.succeedNone
        ], { concurrency: 2 })
        expect(ours.status, `corral run: ${ours.stderr}`).toBe(c.status)
        c.effect?.(ours)
        if (Option.isNone(theirs)) return
        expect(theirs.value.status, `timeout: ${theirs.value.stderr}`).toBe(c.status)
        c.effect?.(theirs.value)
        if (c.sameEnd) expect([ours.code, ours.signal]).toEqual([theirs.value.code, theirs.value.signal])
      }))
  }
}

const oneLine = (result: Ran) => expect(result.stderr.split("\n")).toHaveLength(2)

describe("corral run beside GNU timeout: exit status", () => {
  sideBySide([
    { title: "timeout 0.2 sleep 10", args: ["0.2", "sleep", "10"], status: 124 },
    { title: "timeout 10 sh -c 'exit 3'", args: ["10", "sh", "-c", "exit 3"], status: 3, sameEnd: true },
    { title: "timeout --preserve-status 0.2 sleep 10", args: ["--preserve-status", "0.2", "sleep", "10"], status: 128 + 15 },
    { title: "timeout -p 0.2 sleep 10", args: ["-p", "0.2", "sleep", "10"], status: 128 + 15, since: [9, 6] },
    { title: "timeout -s INT 0.2 sleep 10", args: ["-s", "INT", "0.2", "sleep", "10"], status: 124 },
    { title: "timeout --preserve-status --signal=sigint 0.2 sleep 10", args: ["--preserve-status", "--signal=sigint", "0.2", "sleep", "10"], status: 128 + 2 },
    { title: "timeout --preserve-status -s 130 0.2 sleep 10 (a shell's 128+INT)", args: ["--preserve-status", "-s", "130", "0.2", "sleep", "10"], status: 128 + 2 },
    { title: "timeout -s RTMIN+1 0.2 sleep 10", args: ["-s", "RTMIN+1", "0.2", "sleep", "10"], status: 124 },
    { title: "timeout -s KILL 0.2 sleep 10", args: ["-s", "KILL", "0.2", "sleep", "10"], status: 128 + 9 },
    { title: "timeout -s0 -k 0.3 0.2 sleep 10 (KILL was needed)", args: ["-s0", "-k", "0.3", "0.2", "sleep", "10"], status: 128 + 9 },
    {
      title: "timeout -k 0.3 0.2 sh -c \"trap '' TERM; exec sleep 10\"",
      args: ["-k", "0.3", "0.2", "sh", "-c", "trap '' TERM; exec sleep 10"],
      status: 128 + 9
    },
    {
      title: "timeout --preserve-status -k 0.3 0.2 sh -c \"trap '' TERM; exec sleep 10\"",
      args: ["--preserve-status", "-k", "0.3", "0.2", "sh", "-c", "trap '' TERM; exec sleep 10"],
      status: 128 + 9
    },
    {
      title: "timeout --kill=0.3 --pres -vsTERM 0.2 sh -c \"trap '' TERM; exec sleep 10\" (getopt forms)",
      args: ["--kill=0.3", "--pres", "-vsTERM", "0.2", "sh", "-c", "trap '' TERM; exec sleep 10"],
      status: 128 + 9
    },
    { title: "timeout 10 sh -c 'kill -TERM $$' (dies of it)", args: ["10", "sh", "-c", "kill -TERM $$"], status: 128 + 15, sameEnd: true },
    { title: "timeout 10 sh -c 'kill -KILL $$' (dies of it)", args: ["10", "sh", "-c", "kill -KILL $$"], status: 128 + 9, sameEnd: true },
    {
      // SIGALRM (a timeout) once the inner CMD is up: a fixed limit could fire before a loaded machine has started corral
      title: "timeout 60 timeout 60 sh -c 'trap \"echo inner got TERM; exit 3\" TERM; …'; SIGALRM to the outer one (nested: the inner one gets the signal and passes it on)",
      script: "exec $X 60 $X 60 sh -c 'trap \"echo inner got TERM; exit 3\" TERM; echo up; sleep 30 & wait'",
      send: "SIGALRM",
      status: 124,
      effect: (r) => expect(r.stdout).toMatch(/^up\ninner got TERM\n/)
    },
    { title: "timeout 10 not-executable.sh", args: ["10", notExecutable], status: 126 },
    { title: "timeout 10 no-such-command", args: ["10", "corral-test-no-such-command"], status: 127 },
    {
      title: "{ timeout -v 0.2 sleep 10 2>&1; } | : (stderr a closed pipe)",
      script: "{ $X -v 0.2 sleep 10 2>&1; echo $? > \"$F\"; } | :; exit \"$(cat \"$F\")\"",
      status: 124,
      since: [9, 10]
    }
  ])
})

describe("corral run beside GNU timeout: usage errors are 125", () => {
  const usage = (title: string, args: ReadonlyArray<string>, since?: readonly [number, number]): Case =>
    ({ title, args, status: 125, effect: (r) => expect(r.stderr).not.toBe(""), ...(since ? { since } : {}) })
  sideBySide([
    usage("timeout --signal=invalid 1 true", ["--signal=invalid", "1", "true"]),
    usage("timeout -s 65 1 true", ["-s", "65", "1", "true"]),
    usage("timeout --kill-after=invalid 1 true", ["--kill-after=invalid", "1", "true"]),
    usage("timeout --frobnicate 1 true", ["--frobnicate", "1", "true"]),
    usage("timeout invalid true", ["invalid", "true"]),
    usage("timeout ' -0.1' true", [" -0.1", "true"]),
    usage("timeout -- -1 true", ["--", "-1", "true"]),
    usage("timeout 42D true", ["42D", "true"]),
    usage("timeout 1e true", ["1e", "true"]),
    usage("timeout 0x true", ["0x", "true"]),
    usage("timeout nan true", ["nan", "true"]),
    usage("timeout '0.1 ' true", ["0.1 ", "true"]),
    usage("timeout -- -1e-10000 true (a negative underflow)", ["--", "-1e-10000", "true"], [9, 7]),
    usage("timeout 5 (no command)", ["5"])
  ])

  it.scopedLive("and corral's message is one line", () =>
    Effect.gen(function*() {
      for (const args of [["--signal=invalid", "1", "true"], ["-k", "x", "1", "true"], ["invalid", "true"], ["5"]]) {
        oneLine(yield* runWith([bin, "run"], { title: "", args, status: 125 }))
      }
    }))
})

describe("corral run beside GNU timeout: durations", () => {
  sideBySide([
    { title: "timeout .1 sleep 10", args: [".1", "sleep", "10"], status: 124 },
    { title: "timeout 0x1p-3 sleep 10 (a hex float)", args: ["0x1p-3", "sleep", "10"], status: 124 },
    { title: "timeout ' +1e-1' sleep 10", args: [" +1e-1", "sleep", "10"], status: 124 },
    { title: "timeout 0 sleep 0.3 (0 disables)", args: ["0", "sleep", "0.3"], status: 0 },
    { title: "timeout -- -0 true", args: ["--", "-0", "true"], status: 0 },
    { title: "timeout 1e3 true", args: ["1e3", "true"], status: 0 },
    { title: "timeout 2.34e+5d true", args: ["2.34e+5d", "true"], status: 0 },
    { title: "timeout 9223372036854775808d sleep 0.3 (clamped, never fires)", args: ["9223372036854775808d", "sleep", "0.3"], status: 0 },
    { title: "timeout 1.18e+4932 sleep 0.3 (clamped, never fires)", args: ["1.18e+4932", "sleep", "0.3"], status: 0 },
    { title: "timeout inf true", args: ["inf", "true"], status: 0 },
    // past 2^31-1 ms a Node timer fires at once, and effect's never: both would be wrong
    { title: "timeout 25d sleep 0.3 (past Node's timer limit)", args: ["25d", "sleep", "0.3"], status: 0 },
    { title: "timeout 1e-10000 sleep 10 (too small to represent, still fires)", args: ["1e-10000", "sleep", "10"], status: 124, since: [9, 7] },
    { title: "timeout -k 1e-10000 0.2 sh -c \"trap '' TERM; exec sleep 10\"", args: ["-k", "1e-10000", "0.2", "sh", "-c", "trap '' TERM; exec sleep 10"], status: 137, since: [9, 7] }
  ])

  it.scopedLive("corral run 300ms sleep 10 → 124: corral's own ms (timeout(1) says 125)", () =>
    Effect.gen(function*() {
      expect((yield* runWith([bin, "run"], { title: "", args: ["300ms", "sleep", "10"], status: 124 })).status).toBe(124)
    }))
})

/** CMD: prints a line once it is up, then sleeps, one process that nothing orphans. */
const upThenSleep = ["sh", "-c", "echo up; exec sleep 10"]

/**
 * CMD: exits 7 on `signal`. Node, not sh: sh's child between fork and exec
 * still has sh's handler, and a signal caught there is lost, so a trapping
 * sh can wait out its whole sleep (GNU timeout, which sends twice, hit it).
 */
const upThenExit7On = (signal: NodeJS.Signals) =>
  [process.execPath, "-e", `process.on("${signal}", () => process.exit(7)); console.log("up"); setTimeout(() => {}, 10000)`]

describe("corral run beside GNU timeout: signals sent to it", () => {
  // timeout before 9.10 dies of SIGUSR1 and SIGUSR2 and leaves CMD running
  for (const [signal, since] of [["SIGINT"], ["SIGTERM"], ["SIGHUP"], ["SIGQUIT"], ["SIGUSR1", [9, 10]], ["SIGUSR2", [9, 10]]] as const) {
    const n = constants.signals[signal]
    sideBySide([
      {
        title: `${signal} to timeout 10 node -e 'process.on("${signal}", () => process.exit(7)) …' (passed on, CMD decides)`,
        args: ["10", ...upThenExit7On(signal)],
        send: signal,
        status: 7,
        sameEnd: true,
        ...(since ? { since } : {})
      },
      {
        title: `${signal} to timeout 10 sh -c '…' (CMD dies of it${signal === "SIGQUIT" ? "; corral exits 131 where timeout dies, not to dump core" : ", and so does the wrapper"})`,
        args: ["10", ...upThenSleep],
        send: signal,
        status: 128 + n,
        sameEnd: signal !== "SIGQUIT",
        ...(since ? { since } : {})
      }
    ])
  }

  sideBySide([
    { title: "SIGALRM to timeout 10 sh -c '…' (a timeout)", args: ["10", ...upThenSleep], send: "SIGALRM", status: 124 },
    {
      title: "SIGINT to timeout -k 0.3 10 sh -c \"trap '' INT; …\" (killed that long after)",
      args: ["-k", "0.3", "10", "sh", "-c", "trap '' INT; echo up; exec sleep 10"],
      send: "SIGINT",
      status: 128 + 9,
      sameEnd: true
    }
  ])
})

describe("corral run beside GNU timeout: signals ignored when it started", () => {
  sideBySide([
    {
      title: "trap '' PIPE; timeout 10 yes | head -1 (yes sees EPIPE)",
      script: "trap '' PIPE; $X 10 yes | head -1 > /dev/null; exit ${PIPESTATUS[0]}",
      status: 1,
      effect: (r) => expect(r.stderr).toMatch(/^yes: standard output: Broken pipe\n/)
    },
    {
      title: "timeout 10 yes | head -1 (yes dies of SIGPIPE, and so does the wrapper)",
      script: "$X 10 yes | head -1 > /dev/null; exit ${PIPESTATUS[0]}",
      status: 128 + 13
    },
    {
      title: "trap '' USR1; timeout 10 sh -c 'kill -USR1 $$; echo alive'",
      script: "trap '' USR1; $X 10 sh -c 'kill -USR1 $$; echo alive'",
      status: 0,
      effect: (r) => expect(r.stdout).toBe("alive\n")
    },
    {
      title: "trap '' INT; timeout 10 sh -c 'kill -INT $$; echo alive'",
      script: "trap '' INT; $X 10 sh -c 'kill -INT $$; echo alive'",
      status: 0,
      since: [9, 10],
      effect: (r) => expect(r.stdout).toBe("alive\n")
    },
    {
      title: "trap '' USR1; timeout 10 …; kill -USR1 (the wrapper ignores it too)",
      script: "trap '' USR1; $X 10 sh -c 'echo up > \"$F\"; sleep 1' & pid=$!; " +
        "until [ -s \"$F\" ]; do sleep 0.05; done; kill -USR1 $pid; wait $pid",
      status: 0
    }
  ])
})

/** util-linux `script` gives an interactive bash a terminal of its own, so keys become the signals a terminal sends. */
const hasScript = spawnSync("script", ["--version"], { stdio: "ignore" }).status === 0

/** An interactive bash at a terminal of its own: type keys, wait for output, read what came since a mark. */
const terminal = Effect.gen(function*() {
  const child = yield* Effect.acquireRelease(
    Effect.sync(() => spawn("script", ["-qfec", "bash --norc --noprofile -i", "/dev/null"], { stdio: "pipe", env: { ...process.env, PS1: "$ " } })),
    (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
  )
  let out = ""
  child.stdout.on("data", (bytes: Buffer) => (out += bytes.toString()))
  return {
    type: (keys: string) => Effect.sync(() => child.stdin.write(keys)),
    mark: () => out.length,
    since: (mark: number) => out.slice(mark),
    /** Waits for `pattern` in what the terminal showed after `mark`. */
    waitFor: (pattern: RegExp, mark = 0) =>
      Effect.mapError(until(`${pattern}`, () => pattern.test(out.slice(mark))), (e) => new Error(`${e.message} at the terminal: ${JSON.stringify(out.slice(-400))}`))
  }
})

/** Lines a program printed (not the echo of what was typed). */
const printed = (text: string, line: string) => (text.match(new RegExp(`^${line}\\r?$`, "gm")) ?? []).length

/** `body` typed at a terminal with `corral run OPTIONS` and `timeout OPTIONS` (default: a 30 s limit); both must return the same. */
/** The status the interactive bash reports for the job that just ended. */
const statusAfter = (tty: Effect.Effect.Success<typeof terminal>) =>
  Effect.gen(function*() {
    const ended = tty.mark()
    yield* tty.type("echo status=$?\n")
    yield* tty.waitFor(/^status=\d+\r?$/m, ended)
    return /^status=(\d+)\r?$/m.exec(tty.since(ended))![1]
  })

/** A ticking job: Ctrl-Z, 800 ms stopped, fg, then Ctrl-C; how many ticks came while stopped, and its status. */
const suspendResumeInterrupt = (wrapper: string) =>
  Effect.gen(function*() {
    const tty = yield* terminal
    yield* tty.type(`${wrapper} sh -c 'while :; do echo tick; sleep 0.2; done'\n`)
    yield* tty.waitFor(/^tick\r?$/m)
    yield* tty.type("\x1a")
    yield* tty.waitFor(/Stopped/)
    const stopped = tty.mark()
    yield* Effect.sleep("800 millis")
    const ticksWhileStopped = printed(tty.since(stopped), "tick")
    const resumed = tty.mark()
    yield* tty.type("fg\n")
    yield* tty.waitFor(/^tick\r?$/m, resumed)
    yield* tty.type("\x03")
    return { ticksWhileStopped, status: yield* statusAfter(tty) }
  })

const atTerminal = (title: string, body: (wrapper: string) => Effect.Effect<unknown, Error, Scope.Scope>, options = "30") =>
  (hasScript ? it.scopedLive : it.scopedLive.skip)(
    `${title} ${gnuVersion === undefined ? "(GNU timeout is not installed: corral alone)" : `(beside GNU timeout ${gnuVersion.join(".")})`}`,
    () =>
      Effect.gen(function*() {
        const wrappers = [`${bin} run ${options}`, ...(gnuVersion === undefined ? [] : [`timeout ${options}`])]
        const results = yield* Effect.all(wrappers.map((w) => Effect.scoped(body(w))), { concurrency: 2 })
        expect(results[0]).toEqual(results[results.length - 1])
      })
  )

/** Whether this user may make a PID namespace (root): unshare without --mount-proc leaves /proc the parent's. */
const canUnshare = spawnSync("unshare", ["--pid", "--fork", "true"], { stdio: "ignore" }).status === 0

;(canUnshare ? describe : describe.skip)("corral run beside GNU timeout: PID 1 of a PID namespace whose /proc is the parent's", () => {
  // `unshare --pid --fork` without --mount-proc: /proc/1 is not corral, every pid there names another process.
  // corral must still find CMD's group by its own namespace's ids: TERM is enough, and all three are counted
  const stopped = (r: Ran) => expect(r.stderr).toMatch(/SIGTERM sufficed, 3 processes|sending signal TERM/)
  sideBySide([
    {
      title: "unshare --pid --fork timeout -v 0.3 sh -c 'sleep 30 & sleep 30'",
      script: "exec unshare --pid --fork $X -v 0.3 sh -c 'sleep 30 & sleep 30'",
      status: 124,
      effect: stopped
    },
    {
      title: "unshare --pid --fork timeout -v --preserve-status 0.3 sh -c 'sleep 30 & sleep 30'",
      script: "exec unshare --pid --fork $X -v --preserve-status 0.3 sh -c 'sleep 30 & sleep 30'",
      status: 128 + 15,
      effect: stopped
    },
    {
      title: "unshare --pid --fork timeout -k 0.3 0.3 sh -c \"trap '' TERM; exec sleep 30\"",
      script: "exec unshare --pid --fork $X -k 0.3 0.3 sh -c \"trap '' TERM; exec sleep 30\"",
      status: 128 + 9
    },
    { title: "unshare --pid --fork timeout 10 sh -c 'exit 3'", script: "exec unshare --pid --fork $X 10 sh -c 'exit 3'", status: 3 }
  ])
})

describe("corral run at a terminal (an interactive bash under script(1))", () => {
  atTerminal("Ctrl-Z stops the whole job, fg resumes it, Ctrl-C ends it: 130", (wrapper) =>
    Effect.gen(function*() {
      const result = yield* suspendResumeInterrupt(wrapper)
      expect(result.ticksWhileStopped).toBe(0)
      return result
    }))

  // under timeout(1) the REPL gets each Ctrl-C twice (from the terminal and passed on); under corral once
  atTerminal("Ctrl-C reaches a REPL that handles it, which keeps running past the grace; Ctrl-\\ ends it: 131", (wrapper) =>
    Effect.gen(function*() {
      const tty = yield* terminal
      const repl = "process.on('SIGINT', () => console.log('caught')); console.log('ready'); setInterval(() => console.log('tick'), 300)"
      yield* tty.type(`${wrapper} ${process.execPath} -e "${repl}"\n`)
      yield* tty.waitFor(/^ready\r?$/m)
      yield* tty.type("\x03")
      // the terminal echoes ^C on the line the REPL then prints to
      yield* tty.waitFor(/caught\r?$/m)
      // longer than corral's default grace: a signal passed on is not a stop
      yield* Effect.sleep("3500 millis")
      const later = tty.mark()
      yield* tty.waitFor(/^tick\r?$/m, later)
      yield* tty.type("\x1c")
      return { aliveAfterGrace: true, status: yield* statusAfter(tty) }
    }))
})

describe("corral run --foreground at a terminal (an interactive bash under script(1))", () => {
  atTerminal("CMD reads the terminal, /dev/tty too: 0", (wrapper) =>
    Effect.gen(function*() {
      const tty = yield* terminal
      yield* tty.type(`${wrapper} sh -c 'echo ask; read -r line < /dev/tty; echo got=$line'\n`)
      yield* tty.waitFor(/^ask\r?$/m)
      yield* tty.type("hello\n")
      yield* tty.waitFor(/^got=hello\r?$/m)
      const status = yield* statusAfter(tty)
      expect(status).toBe("0")
      return { read: true, status }
    }), "--foreground 30")

  atTerminal("Ctrl-Z stops the job from the terminal, fg resumes it, Ctrl-C ends it: 130", (wrapper) =>
    Effect.gen(function*() {
      const result = yield* suspendResumeInterrupt(wrapper)
      expect(result).toEqual({ ticksWhileStopped: 0, status: "130" })
      return result
    }), "--foreground 30")

  // as GNU documents: only CMD is signalled, and what it started is neither waited for nor stopped
  atTerminal("on timeout only CMD is signalled; its child lives on: 124", (wrapper) =>
    Effect.gen(function*() {
      const tty = yield* terminal
      yield* tty.type(`${wrapper} sh -c 'sleep 30 & echo child=$!; sleep 30'\n`)
      yield* tty.waitFor(/^child=\d+\r?$/m)
      const child = Number(/^child=(\d+)\r?$/m.exec(tty.since(0))![1])
      yield* Effect.addFinalizer(() => Effect.sync(() => process.kill(child, "SIGKILL")).pipe(Effect.ignore))
      const status = yield* statusAfter(tty)
      const childAlive = fs.readFileSync(`/proc/${child}/stat`, "latin1").split(") ")[1]![0] !== "Z"
      expect({ status, childAlive }).toEqual({ status: "124", childAlive: true })
      return { status, childAlive }
    }), "--foreground 0.5")
})
