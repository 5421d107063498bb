/**
 * Output as a screen shows it: the rendering the tools apply to every
 * result's output, then the same through `bash`, `bash_output` and a tty
 * shell over real processes, with progress bars written the ways real
 * programs write them.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { makeScreen, screenText } from "../dist/ScreenText.js"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe("screenText", () => {
  it("leaves text without carriage returns, backspaces or erasures as it is, escapes of a pipe included", () => {
    for (const text of ["", "a\nb\n", "no newline at the end", "\u001b[31mred\u001b[0m\n", "tab\there\n\n\n"]) {
      expect(screenText(text, false)).toBe(text)
    }
  })

  it("keeps the last redraw of a progress bar, and what follows it", () => {
    const bar = Array.from({ length: 300 }, (_, i) => `\rdownloading ${i + 1}/300`).join("")
    expect(screenText(`start\n${bar}\ndone\n`, false)).toBe("start\ndownloading 300/300\ndone\n")
  })

  it("ends a line at \\r\\n as at \\n", () => {
    expect(screenText("a\r\nb\r\r\nc", false)).toBe("a\nb\nc")
  })

  it("overwrites from the line's start, leaving what a shorter redraw does not cover, as a terminal does", () => {
    expect(screenText("100% done\rok", false)).toBe("ok0% done")
  })

  it("erases within the line: ESC[K to its end, ESC[1K to its start, ESC[2K all of it", () => {
    expect(screenText("100% done\rok\u001b[K\n", false)).toBe("ok\n")
    expect(screenText("100% done\rok\u001b[0K", false)).toBe("ok")
    expect(screenText("abcdef\r\u001b[2Kxy", false)).toBe("xy")
    expect(screenText("abcdef\u001b[2K", false)).toBe("")
    expect(screenText("abcdef\rabc\u001b[1K", false)).toBe("    ef")
  })

  it("moves one column back at a backspace, never before the line's start", () => {
    expect(screenText("working |\b/\b-\b\\\b|\n", false)).toBe("working |\n")
    expect(screenText("\b\bab\b\bX", false)).toBe("Xb")
  })

  it("pads with spaces where the cursor moved past the end of what is shown", () => {
    expect(screenText("abc\u001b[2Kxy", false)).toBe("   xy")
  })

  it("removes a terminal's other escape sequences, and renders the rest", () => {
    expect(screenText("\u001b[1;32m 50%\u001b[0m\r\u001b[1;32m100%\u001b[0m\r\n\u001b]0;title\u0007next\r\n", true)).toBe("100%\nnext\n")
  })

  it("removes a terminal's title cut off by a read to its line's end, never past it", () => {
    expect(screenText("a\u001b]0;cut off\nnext\u0007line\n", true)).toBe("a\nnext\u0007line\n")
  })

  it("renders each line on its own: a return never reaches back over a newline", () => {
    expect(screenText("first\nsecond\rS\nthird\r", false)).toBe("first\nSecond\nthird")
  })

  // rebuilt as a string at each redraw, this took 39 s, the supervisor's event loop with it, and the test's timeout
  it("renders a spinner's 64,000 redraws over a 128 KiB line: the line, its first cell redrawn", () => {
    const rendered = screenText(`${"a".repeat(128 * 1024)}${"\r|\r/\r-\r\\".repeat(16_000)}\n`, false)
    expect(rendered).toBe(`\\${"a".repeat(128 * 1024 - 1)}\n`)
  })

  it("gives the same text rendered again: nothing it returns moves the cursor", () => {
    const text = "a\r\nprogress 1%\rprogress 99%\u001b[K\r\nx\by\nz\u001b[2K\n"
    const once = screenText(text, false)
    expect(screenText(once, false)).toBe(once)
    expect(once).not.toMatch(/[\r\b]|\u001b\[[012]?K/)
  })
})

describe("makeScreen: output rendered as it comes", () => {
  /** `text` fed in pieces of `size`, rendered. */
  const inPieces = (text: string, size: number, tty: boolean) => {
    const screen = makeScreen(tty)
    let out = ""
    for (let at = 0; at < text.length; at += size) out += screen.push(text.slice(at, at + size))
    return out + screen.end()
  }

  it("renders text cut anywhere, escape sequences and `\\r\\n` pairs included, as screenText renders it whole, where no line runs past what it holds", () => {
    const bar = Array.from({ length: 3000 }, (_, i) => `\r\u001b[32mfetching ${i + 1}/3000\u001b[0m\u001b[K`).join("")
    const texts = [
      "a\r\nprogress 1%\rprogress 99%\u001b[K\r\nx\by\nz\u001b[2K\nlast",
      `begin\n${bar}\r\ndone\n\u001b]0;title\u0007next\n`,
      `${"x".repeat(10_000)}\rY\n`
    ]
    for (const text of texts) {
      for (const tty of [false, true]) {
        for (const size of [1, 7, 100, 4096, 100_000]) expect(inPieces(text, size, tty)).toBe(screenText(text, tty))
      }
    }
  })

  it("holds a bar redrawn without a newline as it stands on screen, cursor included: it returns nothing until its line ends", () => {
    const screen = makeScreen(false)
    const pieces = Array.from({ length: 20_000 }, (_, i) => `\rstep ${20_000 - i}`)
    expect(pieces.map(screen.push).join("")).toBe("")
    // the cursor is at the end of "step 1": what follows is written from there, over the rest of the widest redraw
    expect(screen.push("!\n")).toBe("step 1!000\n")
  })

  it("lets a line longer than it holds go as it stands, and starts a line of its own after it", () => {
    const screen = makeScreen(false)
    const long = "y".repeat(50_000)
    const out = screen.push(long.slice(0, 30_000)) + screen.push(long.slice(30_000)) + screen.push("\rZ\n") + screen.end()
    expect(out.replace(/^y+/, "")).toBe("Z\n")
    expect(out.length).toBe(50_000 + 2)
  })
})

describe.skipIf(!inPidNamespace)("progress bars over real processes (needs the PID namespace of npm test)", () => {
  const bar = "i=0; while [ $i -lt 400 ]; do i=$((i+1)); printf '\\rfetching %d/400' $i; done; printf '\\n'"

  it.live("bash in the foreground returns the bar's last redraw, not its 400 steps", () =>
    withTools(Effect.gen(function*() {
      const text = okText(yield* call("bash", { command: `echo begin; ${bar}; echo end` }))
      expect(text).toMatch(/^begin\nfetching 400\/400\nend\n\[exited with code 0 after /)
    })))

  it.live("bash in the foreground keeps the lines around a bar longer than a result holds: the cap counts what the screen shows", () =>
    withTools(Effect.gen(function*() {
      // 8000 redraws, about 150,000 characters as written: five times the cap
      const long = "i=0; while [ $i -lt 8000 ]; do i=$((i+1)); printf '\\rfetching %d/8000' $i; done; printf '\\n'"
      const text = okText(yield* call("bash", { command: `echo begin; ${long}; echo end` }))
      expect(text).toMatch(/^begin\nfetching 8000\/8000\nend\n\[exited with code 0 after /)
      expect(text).not.toContain("characters cut")
    })))

  it.live("bash_output of a background shell, read while the bar runs and after, shows each read's last redraw", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: `${bar}; printf 'step %s\\r' 1 2 3; echo; echo ready; sleep 30`, run_in_background: true })
      const read = okText(yield* call("bash_output", { shell_id: "s1", wait_for: "ready", wait_timeout: 15_000 }))
      expect(read).not.toContain("\r")
      expect(read).toMatch(/(^|\n)fetching 400\/400\nstep 3\nready\n/)
      expect(read.match(/fetching/g)?.length).toBe(1)
      expect(okText(yield* call("kill_bash", { shell_id: "s1" }))).toMatch(/^Killed shell s1/)
    })))

  it.live("a tty shell's bar, drawn with colours and an erase in line, reads as its last state", () =>
    withTools(Effect.gen(function*() {
      const drawn = "for i in 1 2 3 4 5 6 7 8 9 10; do printf '\\r\\033[32m%d0%%\\033[0m downloading a long name\\033[K' $i; done; printf '\\rdone\\033[K\\n'"
      const text = okText(yield* call("bash", { command: drawn, tty: true }))
      expect(text).toMatch(/^done\n\[exited with code 0 after /)
    })))
})
