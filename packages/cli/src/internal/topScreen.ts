/**
 * `corral top`'s screen: a frame is exactly one line per terminal row, none
 * wider than the terminal, so nothing ever wraps or scrolls; each is drawn
 * at its own row and the rest of that row cleared.
 */
import type { ShellEntry } from "./controlClient.js"
import * as Option from "effect/Option"
import * as Table from "./table.js"
import type { State, View } from "./topState.js"
import { shellsOf } from "./topState.js"
import { screenText } from "@corral/tools/ScreenText"

/** The alternate screen, without a cursor. */
export const enter = "\x1b[?1049h\x1b[?25l"
export const leave = "\x1b[?25h\x1b[?1049l"

export const draw = (lines: ReadonlyArray<string>) =>
  lines.map((line, row) => `\x1b[${row + 1};1H${line}\x1b[0m\x1b[K`).join("")

const fitTo = (lines: ReadonlyArray<string>, rows: number) =>
  lines.length >= rows ? lines.slice(0, rows) : [...lines, ...Array<string>(rows - lines.length).fill("")]

/** The rows shown of `count`, so that `selected` stays in a window of `height`. */
const windowOf = (count: number, selected: number, height: number) => {
  const start = Math.max(0, Math.min(selected - height + 1, count - height, selected))
  return { start: Math.max(0, start), end: Math.min(count, Math.max(0, start) + height) }
}

const tableLines = (state: State, color: boolean): ReadonlyArray<string> => {
  const { columns, rows } = state.size
  const title = Table.truncate(
    Option.match(state.snapshot, {
      onNone: () => "corral top: looking for supervisors…",
      onSome: (s) => `corral top: ${Table.summary(s)}`
    }),
    columns
  )
  const footer = Table.truncate("↑/↓ or j/k select · Enter attach · q quit", columns)
  const shells = shellsOf(state)
  const body = (): ReadonlyArray<string> => {
    if (Option.isNone(state.snapshot)) return []
    const notes = Table.problems(state.snapshot.value.supervisors).map((p) => Table.truncate(p, columns))
    if (shells.length === 0) return ["no background shells", ...notes]
    const options = { now: state.now, columns: columns - 2 }
    const painted = Table.render(shells, { ...options, color })
    const plain = Table.render(shells, { ...options, color: false })
    const height = Math.max(1, rows - 3 - notes.length)
    const { end, start } = windowOf(shells.length, state.selected, height)
    const visible = painted.rows.slice(start, end).map((row, i) =>
      start + i === state.selected
        ? Table.paint(color, "inverse", Table.padEnd(Table.truncate(`> ${plain.rows[start + i]!}`, columns), columns))
        : `  ${row}`
    )
    return [`  ${painted.header}`, ...visible, ...notes]
  }
  return [Table.paint(color, "bold", title), ...fitTo(body(), rows - 2), Table.paint(color, "dim", footer)]
}

/** One line of output as a terminal shows it (as the tools' results do), with nothing left that would move our cursor. */
const visibleText = (line: string) =>
  screenText(line, true)
    .replace(/\t/g, "    ")
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, "")

const wrap = (line: string, columns: number): ReadonlyArray<string> => {
  const chars = [...line]
  if (chars.length <= columns) return [line]
  const parts: Array<string> = []
  for (let i = 0; i < chars.length; i += columns) parts.push(chars.slice(i, i + columns).join(""))
  return parts
}

/** The last `rows` screen lines of `text`, long lines wrapped. */
export const outputLines = (text: string, columns: number, rows: number): ReadonlyArray<string> => {
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  const shown: Array<string> = []
  for (let i = lines.length - 1; i >= 0 && shown.length < rows; i--) {
    shown.unshift(...wrap(visibleText(lines[i]!), Math.max(1, columns)))
  }
  return shown.slice(Math.max(0, shown.length - rows))
}

const statusLine = (entry: ShellEntry | undefined, id: string, now: number, color: boolean, columns: number) => {
  if (entry === undefined) return Table.truncate(id, columns)
  const look = Table.lookOf(entry)
  const plain = Table.truncate(
    `${look.glyph} ${entry.id}  ${look.label}  ${Table.badge(Table.elapsedMs(entry, now))}  ${Table.oneLine(entry.info.command)}`,
    columns
  )
  const head = `${look.glyph} ${entry.id}  ${look.label}`
  return plain.startsWith(head) ? Table.paint(color, look.tone, head) + plain.slice(head.length) : plain
}

const attachedLines = (state: State, view: Extract<View, { _tag: "Attached" }>, color: boolean) => {
  const { columns, rows } = state.size
  const entry = shellsOf(state).find((s) => s.id === view.id)
  const ended = Option.match(view.ended, { onNone: () => "following live output", onSome: (why) => why })
  const footer = Table.truncate(`Esc or q back · ${ended}`, columns)
  const body = view.text === "" && Option.isNone(view.ended) ? ["(no output yet)"] : outputLines(view.text, columns, rows - 2)
  return [statusLine(entry, view.id, state.now, color, columns), ...fitTo(body, rows - 2), Table.paint(color, "dim", footer)]
}

export const frame = (state: State, color: boolean): ReadonlyArray<string> => {
  if (state.size.rows < 3 || state.size.columns < 10) return fitTo([Table.truncate("corral top: terminal too small", state.size.columns)], state.size.rows)
  return state.view._tag === "Table" ? tableLines(state, color) : attachedLines(state, state.view, color)
}
