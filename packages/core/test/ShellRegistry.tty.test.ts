/**
 * Shells on a pseudo-terminal (`tty: true`): a terminal for stdin, stdout and
 * stderr, input typed through its line discipline (echo, Ctrl-C to the
 * foreground job, Ctrl-D as end of file), the exit status, and a stop that
 * leaves nothing. Real processes, a real pty, /proc read directly.
 */
import { ShellInput, ShellRegistry } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { groupContainment, inPidNamespace, kernelProcesses, tempDir } from "./helpers.js"
import { eventually, nothingLeft, ownShellPrefix, registryLayer, taggedProcesses } from "./fixtures/registry/harness.js"

const owner = "tty-test"

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

/** Everything the shell printed, as a terminal shows it. */
const screen = (id: string) =>
  Effect.flatMap(ShellRegistry, (registry) => Effect.map(registry.output(id, { mode: "all" }), (r) => r.text.replace(/\r\n/g, "\n")))

/** Waits until the shell has printed something matching `pattern`. */
const untilPrinted = (id: string, pattern: RegExp) =>
  eventually(`${pattern} from ${id}`, Effect.map(screen(id), (text) => (pattern.test(text) ? text : undefined)), 15_000)

const untilEnded = (id: string) =>
  eventually(
    `the end of ${id}`,
    Effect.flatMap(ShellRegistry, (r) => Effect.map(r.info(id), (info) => (info.status._tag === "Exited" || info.status._tag === "Killed" ? info.status : undefined))),
    15_000
  )

/** Processes of the shell whose command name is `comm`. */
const running = (tag: string, comm: string) => {
  const tagged = new Set(taggedProcesses(tag).map((p) => p.pid))
  return kernelProcesses().filter((p) => tagged.has(p.pid) && p.comm === comm && p.state !== "Z")
}

describe.skipIf(!inPidNamespace)("shells on a terminal (needs the PID namespace of npm test)", () => {
  it.live("give the command a terminal for stdin, stdout and stderr, in a session of its own", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const info = yield* registry.start({ command: "test -t 0 && test -t 1 && test -t 2 && echo on a terminal; tty; exit 3", tty: true }, { owner })
      expect(info.tty).toBe(true)
      expect(yield* untilEnded(info.id)).toEqual({ _tag: "Exited", code: 3 })
      const text = yield* screen(info.id)
      expect(text).toMatch(/^on a terminal\n\/dev\/pts\/\d+\n$/)
      // a shell on pipes says nothing of a terminal
      const piped = yield* registry.start({ command: "true" }, { owner })
      expect(piped.tty).toBeUndefined()
    }).pipe(Effect.provide(registryLayer())))

  it.live("a REPL reads typed lines and echoes them, as at a terminal; Ctrl-D at the prompt ends it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const { id } = yield* registry.start({ command: "python3 -i -q", tty: true, env: { TERM: "dumb" } }, { owner })
      yield* untilPrinted(id, />>> $/)
      expect(yield* ShellInput.send(id, { text: "sum(range(10))\n" }, { owner })).toEqual({ _tag: "Written", chars: 15, eof: false, tty: true })
      yield* untilPrinted(id, /sum\(range\(10\)\)\n45\n>>> $/)
      expect(yield* ShellInput.send(id, { eof: true }, { owner })).toEqual({ _tag: "Written", chars: 0, eof: true, tty: true })
      expect(yield* untilEnded(id)).toEqual({ _tag: "Exited", code: 0 })
      // the terminal is gone with the shell
      expect(yield* Effect.flip(ShellInput.send(id, { text: "1\n" }, { owner }))).toMatchObject({ _tag: "NoStdin" })
    }).pipe(Effect.provide(registryLayer())))

  it.live("Ctrl-C reaches the foreground job through the line discipline, and the interactive shell goes on", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const { id, tag } = yield* registry.start({ command: "PS1='$ ' bash --norc --noprofile -i", tty: true, env: { TERM: "dumb" } }, { owner })
      yield* untilPrinted(id, /\$ $/)
      yield* ShellInput.send(id, { text: "sleep 300\n" }, { owner })
      const [sleeper] = yield* eventually("the foreground sleep", Effect.sync(() => running(tag, "sleep")[0] === undefined ? undefined : running(tag, "sleep")))
      // job control: the sleep is a group of its own, in the terminal's foreground
      const bash = kernelProcesses().find((p) => p.pid === sleeper!.ppid)!
      expect(sleeper!.pgid).not.toBe(bash.pgid)
      expect(yield* ShellInput.send(id, { text: "\u0003" }, { owner })).toMatchObject({ _tag: "Written", tty: true })
      yield* eventually("the sleep interrupted", Effect.sync(() => (running(tag, "sleep").length === 0 ? true : undefined)))
      yield* ShellInput.send(id, { text: "echo status=$?\n" }, { owner })
      yield* untilPrinted(id, /\nstatus=130\n/)
      expect((yield* registry.info(id)).status._tag).toBe("Running")
      yield* registry.kill(id, { owner })
    }).pipe(Effect.provide(registryLayer())))

  it.live("a terminal of the size asked for, resized by the shell's owner: the command sees each size", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      // one `stty size` per line typed
      const { id } = yield* registry.start({ command: "while read -r line; do stty size; done", tty: { cols: 100, rows: 30 } }, { owner })
      yield* ShellInput.send(id, { text: "\n" }, { owner })
      yield* untilPrinted(id, /^\n30 100\n$/)
      yield* registry.resize(id, { cols: 90, rows: 25 }, { owner })
      yield* ShellInput.send(id, { text: "\n" }, { owner })
      yield* untilPrinted(id, /^\n30 100\n\n25 90\n$/)
      expect((yield* Effect.flip(registry.resize(id, { cols: 0, rows: 25 }, { owner }))).message).toBe(
        "invalid terminal size 0x25 (columns x rows): each must be a whole number from 1 to 1000"
      )
      expect(yield* Effect.flip(registry.resize(id, { cols: 80, rows: 24 }, { owner: "someone else" }))).toMatchObject({ _tag: "NotOwner" })
      yield* registry.kill(id, { owner })
      // once its terminal has closed, there is nothing to resize
      const gone = yield* eventually("the terminal's close", Effect.map(Effect.flip(registry.resize(id, { cols: 80, rows: 24 }, { owner })), (e) => e._tag === "NoTerminal" ? e : undefined).pipe(
        Effect.orElseSucceed(() => undefined)
      ))
      expect(gone.message).toBe(`shell ${id} has no terminal to resize: it was started without tty, or it has ended`)
    }).pipe(Effect.provide(registryLayer())))

  it.live("refuses a size out of bounds at the start, and a resize of a shell on pipes", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const refused = yield* Effect.flip(registry.start({ command: "true", tty: { cols: 1001, rows: 40 } }, { owner }))
      expect(refused).toMatchObject({ _tag: "InvalidTerminalSize", cols: 1001, rows: 40 })
      const piped = yield* registry.start({ command: "sleep 30", stdin: "pipe" }, { owner })
      expect(yield* Effect.flip(registry.resize(piped.id, { cols: 80, rows: 24 }, { owner }))).toMatchObject({ _tag: "NoTerminal", id: piped.id })
      yield* registry.kill(piped.id, { owner })
    }).pipe(Effect.provide(registryLayer())))

  // node-pty closes the terminal's reader 200 ms after the leader's exit; a supervisor off the CPU
  // then (a busy host) finds the timer due before it reads again. Here it is kept busy on purpose while
  // a job that outlives the leader writes its last line, and until that timer is due. Under pidns the
  // leader is `unshare`, which outlives every member: the command's own leader is this window's.
  it.live("what the terminal holds when its reader closes is read too: a supervisor kept busy past the close loses no line", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const dir = yield* tempDir("corral-tty-late-")
      const { id, pid } = yield* registry.start({
        command: `(trap '' HUP; until [ -e ${dir}/go ]; do sleep 0.01; done; echo late; : > ${dir}/wrote) & echo ready; sleep 0.05; exit 3`,
        tty: true
      }, { owner })
      yield* untilPrinted(id, /ready/)
      yield* eventually("the leader reaped", Effect.sync(() => (fs.existsSync(`/proc/${pid}`) ? undefined : true)))
      // its exit is known to node-pty, whose timer is set; from here on, nothing runs but this
      yield* Effect.sleep(Duration.millis(100))
      const busyUntil = performance.now() + 300
      fs.writeFileSync(path.join(dir, "go"), "")
      while (!fs.existsSync(path.join(dir, "wrote")) && performance.now() < busyUntil + 5_000) {}
      expect(fs.existsSync(path.join(dir, "wrote")), "the job wrote its last line").toBe(true)
      while (performance.now() < busyUntil) {}
      expect(yield* untilEnded(id)).toEqual({ _tag: "Exited", code: 3 })
      expect(yield* screen(id)).toBe("ready\nlate\n")
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ containment: groupContainment }))))

  // the leader's exit ends its terminal's reading (node-pty closes it 200 ms later), not the shell: the job runs on
  it.live("a job that holds the terminal and writes nothing does not hold its reader's close: what is there is read, nothing waited for", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const dir = yield* tempDir("corral-tty-holder-")
      // the leader exits once the job ignores the SIGHUP its exit sends
      const { id, tag } = yield* registry.start({
        command: `(trap '' HUP; : > ${dir}/holding; exec sleep 30) & until [ -e ${dir}/holding ]; do sleep 0.01; done; echo ready; exit 0`,
        tty: true
      }, { owner })
      yield* eventually("the terminal's close", Effect.map(Effect.flip(registry.resize(id, { cols: 80, rows: 24 }, { owner })), (e) => e._tag === "NoTerminal" ? e : undefined).pipe(
        Effect.orElseSucceed(() => undefined)
      ))
      expect(yield* screen(id)).toBe("ready\n")
      expect(running(tag, "sleep"), "the job, still holding the terminal").toHaveLength(1)
      yield* registry.kill(id, { owner })
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ containment: groupContainment }))))

  it.live("a kill stops the terminal's shell and all it started: a setsid escaper, and a job that ignores SIGHUP and SIGTERM", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const { id, tag } = yield* registry.start({
        command: `setsid sleep 301 & (trap '' HUP TERM; sleep 302) & echo started; wait`,
        tty: true
      }, { owner })
      yield* untilPrinted(id, /started/)
      yield* eventually("both sleeps", Effect.sync(() => (running(tag, "sleep").length === 2 ? true : undefined)))
      const report = yield* registry.kill(id, { owner })
      expect(report.escalated).toBe(true)
      expect(taggedProcesses(tag)).toEqual([])
      expect(yield* untilEnded(id)).toMatchObject({ _tag: "Killed", by: "request" })
    }).pipe(Effect.provide(registryLayer({ limits: { grace: Duration.millis(300) } }))))
})
