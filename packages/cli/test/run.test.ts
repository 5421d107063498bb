/**
 * `corral run` end to end: the built bin as a real child process, real
 * commands, real signals, and /proc read directly to see what is left.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"

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
    return { shellId, finished, signal: (signal: NodeJS.Signals) => Effect.sync(() => child.kill(signal)) }
  })

const corralRun = (args: ReadonlyArray<string>, stdin?: Uint8Array) => corral(["run", ...args], stdin)

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

  it.scopedLive("is 128+N when CMD dies of signal N", () =>
    Effect.gen(function*() {
      expect((yield* runToEnd(["sh", "-c", "kill -s KILL $$"])).code).toBe(128 + 9)
      expect((yield* runToEnd(["sh", "-c", "kill -s TERM $$"])).code).toBe(128 + 15)
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

  it.scopedLive("is 127 with a message when CMD is not found", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["corral-test-no-such-command"])
      expect(result.code).toBe(127)
      expect(result.stderr).toBe("corral: cannot run corral-test-no-such-command: not found: check the name and PATH\n")
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
      expect(result.stdout.toString()).toMatch(/^usage: corral run \[--timeout D\]/)
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
  for (const [signal, number] of [["SIGINT", 2], ["SIGTERM", 15], ["SIGHUP", 1]] as const) {
    it.scopedLive(`${signal} stops CMD and corral exits 128+${number}`, () =>
      Effect.gen(function*() {
        const run = yield* corralRun(["sh", "-c", `${printId}; exec sleep 30`])
        const shellId = yield* run.shellId
        yield* run.signal(signal)
        expect((yield* run.finished).code).toBe(128 + number)
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

  it.scopedLive("a CMD that ignores the signal passed on is stopped after the grace period", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--grace", "200ms", "--verbose", "sh", "-c", `trap '' HUP; ${printId}; exec sleep 30`])
      const shellId = yield* run.shellId
      yield* run.signal("SIGHUP")
      const result = yield* run.finished
      expect(result.code).toBe(128 + 15)
      expect(result.stderr).toMatch(/^corral: received SIGHUP: passing it on to group \d+\n/)
      expect(result.stderr).toMatch(/corral: stopped group \d+ \((?:cgroup|procScan)\) in \d+ms: SIGTERM sufficed, 1 process\n$/)
      expect(carrying(shellId)).toEqual([])
    }))
})

describe("corral run: --verbose", () => {
  it.scopedLive("reports the timeout and the stop on stderr, one line each", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["--verbose", "--timeout", "200ms", "sleep", "30"])
      expect(result.code).toBe(124)
      expect(result.stderr).toMatch(
        /^corral: timed out after 200ms: stopping group (\d+)\ncorral: stopped group \1 \((?:cgroup|procScan)\) in \d+ms: SIGTERM sufficed, 1 process\n$/
      )
    }))

  it.scopedLive("says so when CMD left nothing behind", () =>
    Effect.gen(function*() {
      const result = yield* runToEnd(["-v", "true"])
      expect(result.stderr).toMatch(/^corral: stopped group \d+ \((?:cgroup|procScan)\) in \d+ms: nothing was left running\n$/)
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
      expect(result.code).toBe(124)
      expect(result.stderr).toMatch(/corral: stopped group \d+ \((?:cgroup|procScan)\) in \d+ms: escalated to SIGKILL for \d+ of 3 processes\n$/)
      expect(carrying(shellId)).toEqual([])
    }))

  it.scopedLive("a background child CMD leaves behind is stopped, and CMD's status kept", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["--verbose", "sh", "-c", `${printId}; sleep 30 & exit 0`])
      const shellId = yield* run.shellId
      const result = yield* run.finished
      expect(result.code).toBe(0)
      expect(result.stderr).toMatch(/^corral: stopped group \d+ \((?:cgroup|procScan)\) in \d+ms: SIGTERM sufficed, 1 process\n$/)
      expect(carrying(shellId)).toEqual([])
    }))

  for (const [signal, number] of [["SIGINT", 2], ["SIGTERM", 15], ["SIGHUP", 1]] as const) {
    it.scopedLive(`${signal} to corral stops every process of the group`, () =>
      Effect.gen(function*() {
        // dash starts background jobs with SIGINT ignored: the stop must still end them
        const run = yield* corralRun(["sh", "-c", `${printId}; sleep 30 & sleep 30 & wait`])
        const shellId = yield* run.shellId
        yield* run.signal(signal)
        expect((yield* run.finished).code).toBe(128 + number)
        expect(carrying(shellId)).toEqual([])
      }))
  }
})
