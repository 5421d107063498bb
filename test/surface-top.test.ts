/**
 * `corral top` (and `corral ls` on a terminal) in a real terminal: tmux runs
 * them in a pane of a known size, keys are sent with send-keys and the
 * screen is read back with capture-pane.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { bin, carrying, stateDir, supervisor, waitFor } from "./fixtures/surfaceProcesses.js"

const hasTmux = spawnSync("tmux", ["-V"]).status === 0
/** tmux's server daemonizes: reparented to a PID 1 that never reaps, it would stay a zombie outside `npm test`'s namespace. */
const inPidNamespace = process.env.CORRAL_TEST_PIDNS === "1"
const inTerminal = hasTmux && inPidNamespace ? describe : describe.skip

/** A tmux server of our own, killed with the scope, with one pane running `command`. */
const terminal = (command: string, size = { columns: 100, rows: 20 }) =>
  Effect.gen(function*() {
    const server = `corral-test-${randomBytes(4).toString("hex")}`
    // tmux runs the pane's command with $SHELL, else the user's login shell: nobody's is nologin, which ends the pane and the server at once
    const tmux = (...args: ReadonlyArray<string>) =>
      execFileSync("tmux", ["-L", server, "-f", "/dev/null", ...args], { encoding: "utf8", env: { ...process.env, SHELL: "/bin/sh" } })
    yield* Effect.acquireRelease(
      Effect.sync(() => tmux("new-session", "-d", "-x", String(size.columns), "-y", String(size.rows), command)),
      () => Effect.sync(() => tmux("kill-server"))
    )
    const screen = (...options: ReadonlyArray<string>) => tmux("capture-pane", "-p", ...options)
    const lines = () => screen().split("\n").slice(0, -1)
    const until = (what: string, check: (lines: ReadonlyArray<string>) => boolean) =>
      waitFor(what, () => (check(lines()) ? lines() : undefined))
    return {
      keys: (...keys: ReadonlyArray<string>) => Effect.sync(() => tmux("send-keys", ...keys)),
      resize: (columns: number, rows: number) => Effect.sync(() => tmux("resize-window", "-x", String(columns), "-y", String(rows))),
      /** tmux's own view: whether the alternate screen is on, and the cursor shown. */
      flags: () => tmux("display-message", "-p", "#{alternate_on} #{cursor_flag}").trim(),
      panePid: () => Number(tmux("display-message", "-p", "#{pane_pid}").trim()),
      screen,
      lines,
      until
    }
  })

/** The pane runs `corral ARGS` then reports its exit status and stays open to be read. */
const corralIn = (dir: string, args: string, env = "") =>
  `${env} CORRAL_STATE_DIR=${dir} ${process.execPath} ${bin} ${args}; echo "corral exited $?"; sleep 60`

const childOf = (pid: number) => Number(execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" }).trim().split("\n")[0])

inTerminal("corral top in a terminal", () => {
  it.scopedLive("shows the table, moves the selection, attaches to live output, follows resizes and restores the terminal on q", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", [
        "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done",
        "exit 3"
      ])
      const b = yield* supervisor(dir, "agent-b", ["sleep 60 # a command long enough to be cut in a narrow terminal, and then some more"])
      const tty = yield* terminal(corralIn(dir, "top"))

      let lines = yield* tty.until("the table", (l) => l.some((x) => x.includes(b.id(1))) && l.some((x) => x.includes("exited 3")))
      expect(tty.flags()).toBe("1 0")
      expect(lines[0]).toBe("corral top: 3 shells (2 running), 2 supervisors")
      expect(lines[1]).toMatch(/^ +ID +SUPERVISOR +STATUS +ELAPSED +COMMAND$/)
      expect(lines[2]).toMatch(new RegExp(`^> ▶  ${a.id(1)} +${a.pid} agent-a +running +\\d+s +i=0; while`))
      expect(lines[3]).toMatch(new RegExp(`^  ✗  ${a.id(2)} +${a.pid} agent-a +exited 3 `))
      expect(lines[4]).toMatch(new RegExp(`^  ▶  ${b.id(1)} +${b.pid} agent-b +running `))
      expect(lines.at(-1)).toContain("Enter attach · q quit")
      for (const line of lines) expect([...line].length).toBeLessThanOrEqual(100)

      yield* tty.keys("j")
      yield* tty.until("the selection on the second row", (l) => l[3]?.startsWith(`> ✗  ${a.id(2)}`) === true)
      yield* tty.keys("Down", "k", "k")
      yield* tty.until("the selection back on the first row", (l) => l[2]?.startsWith(`> ▶  ${a.id(1)}`) === true)

      yield* tty.keys("Enter")
      lines = yield* tty.until("the attached output", (l) => l[0]?.startsWith(`▶ ${a.id(1)}  running`) === true && l.some((x) => /^tick \d+$/.test(x)))
      const lastTick = (l: ReadonlyArray<string>) => Math.max(...l.flatMap((x) => /^tick (\d+)$/.exec(x)?.[1] ?? []).map(Number))
      const before = lastTick(lines)
      yield* tty.until("newer output", (l) => lastTick(l) > before + 5)
      expect(tty.lines().at(-1)).toBe("Esc or q back · following live output")

      yield* tty.keys("Escape")
      yield* tty.until("the table again", (l) => l[0]?.startsWith("corral top:") === true)

      yield* tty.resize(50, 12)
      lines = yield* tty.until("the narrow table", (l) => l.length === 12 && l.some((x) => x.includes(b.id(1)) && x.endsWith("…")))
      for (const line of lines) expect([...line].length).toBeLessThanOrEqual(50)
      expect(lines.filter((l) => l.includes(":s")).length).toBe(3)

      yield* tty.keys("q")
      yield* tty.until("top to exit", (l) => l.includes("corral exited 0"))
      expect(tty.flags()).toBe("0 1")
      expect(carrying(`${a.pid}:`).length).toBeGreaterThan(0)
    }))

  it.scopedLive("restores the terminal when top is ended by Ctrl-C or by a signal", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      yield* supervisor(dir, "agent-a", ["sleep 60"])
      const interrupted = yield* terminal(corralIn(dir, "top"))
      yield* interrupted.until("the table", (l) => l.some((x) => x.includes("sleep 60")))
      yield* interrupted.keys("C-c")
      yield* interrupted.until("top to exit", (l) => l.includes("corral exited 0"))
      expect(interrupted.flags()).toBe("0 1")

      const terminated = yield* terminal(corralIn(dir, "top"))
      yield* terminated.until("the table", (l) => l.some((x) => x.includes("sleep 60")))
      process.kill(childOf(terminated.panePid()), "SIGTERM")
      yield* terminated.until("top to exit", (l) => l.includes("corral exited 143"))
      expect(terminated.flags()).toBe("0 1")
    }))

  it.scopedLive("ls colours the glyphs on a terminal, unless NO_COLOR is set", () =>
    Effect.gen(function*() {
      const dir = yield* stateDir
      const a = yield* supervisor(dir, "agent-a", ["sleep 60"])
      const colour = yield* terminal(corralIn(dir, "ls"))
      yield* colour.until("the listing", (l) => l.includes("corral exited 0"))
      const row = colour.screen("-e").split("\n").find((l) => l.includes(a.id(1)))!
      // tmux re-encodes the attributes it drew: green (32) around the glyph and the status
      expect(row).toMatch(/^(\x1b\[\d+m)*\x1b\[32m(\x1b\[\d+m)*▶/)
      expect(row).toMatch(/\x1b\[32m(\x1b\[\d+m)*running/)

      const plain = yield* terminal(corralIn(dir, "ls", "NO_COLOR=1"))
      yield* plain.until("the listing", (l) => l.includes("corral exited 0"))
      expect(plain.screen("-e")).not.toContain("\x1b[")
      expect(plain.lines().some((l) => l.startsWith(`▶  ${a.id(1)} `))).toBe(true)
    }))
})
