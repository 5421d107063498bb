/**
 * The table of shells and `corral top`'s screen as pure functions: the
 * glyph grammar, the fit to the terminal, and how keys move the view.
 */
import type { ShellEntry, Snapshot } from "../src/internal/controlClient.js"
import { describe, expect, it } from "@effect/vitest"
import * as Table from "../src/internal/table.js"
import * as Screen from "../src/internal/topScreen.js"
import * as TopState from "../src/internal/topState.js"

const startedAt = 1_000_000

type ShellStatus = ShellEntry["info"]["status"]

interface Fields {
  readonly command?: string
  readonly reach?: ShellEntry["reach"]
  readonly endedAt?: number
}

const entry = (id: string, status: ShellStatus, fields: Fields = {}): ShellEntry => ({
  id: `4242:${id}`,
  supervisor: { pid: 4242, startTime: 1, name: "agent-a", startedAt: 0 },
  reach: fields.reach ?? "live",
  info: {
    id,
    tag: `4242:${id}`,
    pid: 5000,
    command: fields.command ?? "npm run dev",
    cwd: "/src",
    owner: "agent",
    startedAt,
    endedAt: fields.endedAt,
    status
  }
})

const snapshotOf = (shells: ReadonlyArray<ShellEntry>): Snapshot => ({
  supervisors: [{ supervisor: shells[0]?.supervisor ?? { pid: 4242, startTime: 1, name: "agent-a", startedAt: 0 }, socket: "/s", state: "live" }],
  shells
})

const ansi = /\x1b\[[0-9;?]*[A-Za-z]/g
const visible = (line: string) => line.replace(ansi, "")

describe("the glyph grammar (ADR-0064)", () => {
  const cases: ReadonlyArray<readonly [string, ShellEntry, string, string]> = [
    ["running", entry("s1", { _tag: "Running" }), "▶", "running"],
    ["a lingering group", entry("s1", { _tag: "Lingering", exit: { _tag: "Exited", code: 0 }, members: 2 }), "▶", "leader exited, 2 left"],
    ["stopping", entry("s1", { _tag: "Stopping", by: "request" }), "■", "stopping"],
    ["exited 0", entry("s1", { _tag: "Exited", code: 0 }), "✓", "exited 0"],
    ["a non-zero exit", entry("s1", { _tag: "Exited", code: 2 }), "✗", "exited 2"],
    ["stopped on request", entry("s1", { _tag: "Killed", signal: "SIGTERM", by: "request" }), "■", "stopped"],
    ["stopped at its lifetime", entry("s1", { _tag: "Killed", signal: "SIGKILL", by: "lifetime" }), "■", "lifetime over"],
    ["killed from outside with SIGTERM", entry("s1", { _tag: "Killed", signal: "SIGTERM" }), "■", "killed SIGTERM"],
    ["a crash by signal", entry("s1", { _tag: "Killed", signal: "SIGSEGV" }), "✗", "killed SIGSEGV"],
    ["an orphan", entry("s1", { _tag: "Running" }, { reach: "orphaned" }), "▶", "orphaned"]
  ]
  for (const [name, shell, glyph, label] of cases) {
    it(`${name}: ${glyph} ${label}`, () => {
      expect(Table.lookOf(shell)).toMatchObject({ glyph, label })
    })
  }

  it("a killed shell is dim, not an error; a failure is red", () => {
    expect(Table.lookOf(entry("s1", { _tag: "Killed", signal: "SIGTERM", by: "request" })).tone).toBe("dim")
    expect(Table.lookOf(entry("s1", { _tag: "Exited", code: 1 })).tone).toBe("red")
  })
})

describe("Table.badge", () => {
  it("is short at every scale", () => {
    expect([0, 59_999, 61_000, 3_726_000, 90_000_000].map(Table.badge)).toEqual(["0s", "59s", "1m01s", "1h02m", "1d01h"])
  })
})

describe("Table.render", () => {
  const shells = [
    entry("s1", { _tag: "Running" }, { command: "npm run dev -- --port 5173 --host 0.0.0.0 --open --strictPort" }),
    entry("s2", { _tag: "Exited", code: 0 }, { command: "make", endedAt: startedAt + 3_000 }),
    entry("s10", { _tag: "Killed", signal: "SIGTERM", by: "request" }, { command: "tail -f log" })
  ]
  const now = startedAt + 75_000

  it("aligns the columns and writes no escape sequence without colour", () => {
    const { header, rows } = Table.render(shells, { now, color: false })
    expect([header, ...rows]).toEqual([
      "   ID        SUPERVISOR    STATUS    ELAPSED  COMMAND",
      "▶  4242:s1   4242 agent-a  running   1m15s    npm run dev -- --port 5173 --host 0.0.0.0 --open --strictPort",
      "✓  4242:s2   4242 agent-a  exited 0  3s       make",
      "■  4242:s10  4242 agent-a  stopped   1m15s    tail -f log"
    ])
  })

  it("colours the glyph and the status only", () => {
    const { rows } = Table.render(shells, { now, color: true })
    expect(rows[0]).toContain("\x1b[32m▶")
    expect(rows[2]).toContain("\x1b[2m■")
    expect(rows.map(visible)).toEqual(Table.render(shells, { now, color: false }).rows)
  })

  it("cuts the command, not the row, to fit a narrow terminal", () => {
    for (const columns of [80, 60, 50]) {
      const { header, rows } = Table.render(shells, { now, color: true, columns })
      for (const line of [header, ...rows]) expect(Table.width(visible(line))).toBeLessThanOrEqual(columns)
      expect(visible(rows[0]!)).toMatch(/^▶  4242:s1 .* npm.*…$/)
    }
  })

  it("keeps a command on one line: control characters cannot move the cursor", () => {
    const sneaky = entry("s1", { _tag: "Running" }, { command: "echo a\nrm -rf /tmp/x\x1b[2J\r" })
    const { rows } = Table.render([sneaky], { now, color: false })
    expect(rows[0]).toMatch(/echo a rm -rf \/tmp\/x \[2J$/)
  })
})

describe("corral top's state", () => {
  const size = { columns: 100, rows: 20 }
  const a = entry("s1", { _tag: "Running" })
  const b = entry("s2", { _tag: "Running" })
  const c = entry("s3", { _tag: "Running" })
  const loaded = (shells: ReadonlyArray<ShellEntry>) =>
    TopState.update(TopState.initial(size), { _tag: "Refreshed", snapshot: snapshotOf(shells), now: startedAt })[0]
  const press = (state: TopState.State, ...names: ReadonlyArray<string>) =>
    names.reduce<readonly [TopState.State, TopState.Command]>(
      ([s], name) => TopState.update(s, { _tag: "Key", name }),
      [state, { _tag: "None" }]
    )

  it("moves the selection with the arrows and j/k, within the rows", () => {
    const state = loaded([a, b, c])
    expect(press(state, "down", "j")[0].selectedId).toBe(c.id)
    expect(press(state, "down", "down", "down", "down")[0].selectedId).toBe(c.id)
    expect(press(state, "down", "k", "up", "up")[0].selectedId).toBe(a.id)
  })

  it("keeps the selected shell selected when rows come and go", () => {
    const state = press(loaded([a, b, c]), "down")[0]
    const reordered = TopState.update(state, { _tag: "Refreshed", snapshot: snapshotOf([c, a, b]), now: startedAt })[0]
    expect(reordered.selectedId).toBe(b.id)
    const gone = TopState.update(reordered, { _tag: "Refreshed", snapshot: snapshotOf([c]), now: startedAt })[0]
    expect(gone.selectedId).toBe(c.id)
  })

  it("attaches with Enter, goes back with Esc or q, and quits with q at the table", () => {
    const [attached, attach] = press(loaded([a, b]), "down", "return")
    expect(attach).toEqual({ _tag: "Attach", id: b.id })
    expect(attached.view).toMatchObject({ _tag: "Attached", id: b.id })
    for (const back of ["escape", "q"]) {
      const [table, detach] = press(attached, back)
      expect(detach).toEqual({ _tag: "Detach" })
      expect(table.view._tag).toBe("Table")
    }
    expect(press(loaded([a]), "q")[1]).toEqual({ _tag: "Quit" })
    expect(press(loaded([]), "return")[1]).toEqual({ _tag: "None" })
  })

  it("keeps the newest output of the attached shell only, up to a bound", () => {
    const attached = press(loaded([a, b]), "return")[0]
    const other = TopState.update(attached, { _tag: "Output", id: b.id, text: "not mine" })[0]
    expect(other.view).toMatchObject({ text: "" })
    const big = "x".repeat(TopState.keptChars)
    const full = TopState.update(attached, { _tag: "Output", id: a.id, text: big })[0]
    const more = TopState.update(full, { _tag: "Output", id: a.id, text: "tail" })[0]
    expect(more.view).toMatchObject({ text: big.slice(4) + "tail" })
  })
})

describe("corral top's screen", () => {
  const shells = Array.from({ length: 30 }, (_, i) =>
    entry(`s${i + 1}`, { _tag: "Running" }, { command: `node server-${i + 1}.js --a-long-option-to-make-the-line-wide=${"x".repeat(40)}` }))

  const framed = (state: TopState.State, color: boolean) => Screen.frame(state, color)

  it("draws exactly one line per row, none wider than the terminal, at every size", () => {
    for (const size of [{ columns: 100, rows: 30 }, { columns: 40, rows: 10 }, { columns: 12, rows: 4 }, { columns: 5, rows: 2 }]) {
      const state = TopState.update(TopState.initial(size), { _tag: "Refreshed", snapshot: snapshotOf(shells), now: startedAt })[0]
      for (const color of [true, false]) {
        const lines = framed(state, color)
        expect(lines).toHaveLength(size.rows)
        for (const line of lines) expect(Table.width(visible(line))).toBeLessThanOrEqual(size.columns)
      }
    }
  })

  it("scrolls to keep the selected row on screen, marked", () => {
    const size = { columns: 80, rows: 10 }
    let state = TopState.update(TopState.initial(size), { _tag: "Refreshed", snapshot: snapshotOf(shells), now: startedAt })[0]
    for (let i = 0; i < 20; i++) state = TopState.update(state, { _tag: "Key", name: "down" })[0]
    const lines = framed(state, false)
    const marked = lines.filter((l) => l.startsWith("> "))
    expect(marked).toHaveLength(1)
    expect(marked[0]).toContain("4242:s21 ")
  })

  it("shows the attached output's last lines, without the escape sequences it contained", () => {
    const size = { columns: 30, rows: 6 }
    const state = TopState.update(TopState.initial(size), { _tag: "Refreshed", snapshot: snapshotOf(shells.slice(0, 1)), now: startedAt })[0]
    const attached = TopState.update(state, { _tag: "Key", name: "return" })[0]
    const text = "one\n\x1b[31mtwo\x1b[0m\nprogress 10%\rprogress 100%\n" + "y".repeat(45) + "\n"
    const withOutput = TopState.update(attached, { _tag: "Output", id: "4242:s1", text })[0]
    const lines = framed(withOutput, false)
    expect(lines[0]).toMatch(/^▶ 4242:s1  running  0s  node/)
    expect(lines.slice(1, 5)).toEqual(["two", "progress 100%", "y".repeat(30), "y".repeat(15)])
    expect(lines[5]).toBe("Esc or q back · following liv…")
  })
})
