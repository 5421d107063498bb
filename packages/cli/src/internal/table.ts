/**
 * The table of background shells, shared by `corral ls` and `corral top`.
 * Rows follow milk's ADR-0064 grammar: `▶` running, `■` stopping, `✓`
 * exited 0, a dim `■` for a shell that was killed (ending a dev server on
 * request is normal, not an error), `✗` any other non-zero exit or error.
 */
import type { ShellEntry, Snapshot, SupervisorView } from "./controlClient.js"

export type Tone = "green" | "yellow" | "red" | "dim" | "bold" | "inverse"

const codes: Readonly<Record<Tone, string>> = {
  green: "32",
  yellow: "33",
  red: "31",
  dim: "2",
  bold: "1",
  inverse: "7"
}

export const paint = (color: boolean, tone: Tone | undefined, text: string) =>
  color && tone !== undefined && text !== "" ? `\x1b[${codes[tone]}m${text}\x1b[0m` : text

export interface Look {
  readonly glyph: string
  readonly tone: Tone
  readonly label: string
}

/** Signals that mean someone ended the shell on purpose, not that it failed. */
const stopSignals = new Set(["SIGTERM", "SIGINT", "SIGKILL", "SIGHUP"])

const stoppedBy = { request: "stopped", lifetime: "lifetime over", shutdown: "stopped at exit" } as const

export const lookOf = (entry: ShellEntry): Look => {
  if (entry.reach === "orphaned") return { glyph: "▶", tone: "yellow", label: "orphaned" }
  if (entry.reach === "unreachable") return { glyph: "▶", tone: "yellow", label: "no answer" }
  const status = entry.info.status
  switch (status._tag) {
    case "Running":
      return { glyph: "▶", tone: "green", label: "running" }
    case "Lingering":
      return { glyph: "▶", tone: "green", label: `leader exited, ${status.members} left` }
    case "Stopping":
      return { glyph: "■", tone: "yellow", label: "stopping" }
    case "Exited":
      return status.code === 0
        ? { glyph: "✓", tone: "green", label: "exited 0" }
        : { glyph: "✗", tone: "red", label: `exited ${status.code}` }
    case "Killed":
      if (status.by !== undefined) return { glyph: "■", tone: "dim", label: stoppedBy[status.by] }
      return stopSignals.has(status.signal)
        ? { glyph: "■", tone: "dim", label: `killed ${status.signal}` }
        : { glyph: "✗", tone: "red", label: `killed ${status.signal}` }
  }
}

export const elapsedMs = (entry: ShellEntry, now: number) => Math.max(0, (entry.info.endedAt ?? now) - entry.info.startedAt)

const two = (n: number) => String(n).padStart(2, "0")

/** A short elapsed-time badge: 42s, 3m07s, 2h05m, 3d04h. */
export const badge = (ms: number) => {
  const s = Math.floor(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m${two(s % 60)}s`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h}h${two(m % 60)}m`
  return `${Math.floor(h / 24)}d${two(h % 24)}h`
}

/**
 * What acts on a terminal instead of showing: the control characters (an
 * escape sequence begins with one), and the marks that reorder text from
 * right to left, which can make a command read as another.
 */
const acting = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g
const actingRuns = new RegExp(`${acting.source}+`, "g")

/** One line of plain text: each run of what acts on a terminal becomes a space. */
export const oneLine = (text: string) => text.replace(actingRuns, " ").trim()

const escapeNames: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\u001b": "\\e" }

/**
 * Text whole, with what would act on a terminal shown as an escape (`\n`,
 * `\e`, `\x07`, `\u202e`): a command or name an agent gave, printed as is,
 * set the title, wrote the clipboard (OSC 52) and cleared the screen of the
 * person who ran `corral show`, and a newline in it faked a field.
 */
export const visible = (text: string) =>
  text.replace(acting, (c) => {
    const code = c.charCodeAt(0)
    return escapeNames[c] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`)
  })

export const width = (text: string) => [...text].length

/** Cuts `text` to `max` columns, marking the cut with an ellipsis. */
export const truncate = (text: string, max: number) => {
  const chars = [...text]
  if (chars.length <= max) return text
  return max <= 0 ? "" : chars.slice(0, max - 1).join("") + "…"
}

export const padEnd = (text: string, columns: number) => text + " ".repeat(Math.max(0, columns - width(text)))

export const supervisorLabel = (entry: ShellEntry) =>
  `${entry.supervisor.pid} ${truncate(oneLine(entry.supervisor.name), 20)}${entry.reach === "orphaned" ? " (dead)" : ""}`

export interface RenderOptions {
  readonly now: number
  readonly color: boolean
  /** Columns to fit; the command is cut to fit them. Unlimited when absent. */
  readonly columns?: number | undefined
}

const headers = ["", "ID", "SUPERVISOR", "STATUS", "ELAPSED", "COMMAND"] as const

/** The header line and one line per shell, every line within `columns`. */
export const render = (shells: ReadonlyArray<ShellEntry>, options: RenderOptions) => {
  const cells = shells.map((entry) => {
    const look = lookOf(entry)
    const texts = [look.glyph, entry.id, supervisorLabel(entry), look.label, badge(elapsedMs(entry, options.now)), oneLine(entry.info.command)]
    return { look, texts }
  })
  const widths = headers.map((h, i) => Math.max(width(h), ...cells.map((c) => width(c.texts[i]!))))
  const columns = options.columns ?? Infinity
  const line = (texts: ReadonlyArray<string>, tone: Tone | undefined, toned: ReadonlySet<number>) => {
    const fixed = texts.slice(0, -1).map((t, i) => padEnd(t, widths[i]!))
    const prefix = fixed.join("  ") + "  "
    const room = columns - width(prefix)
    // too narrow for even the fixed columns: plain text, cut
    if (room < 1) return truncate(prefix, columns).trimEnd()
    const painted = fixed.map((t, i) => (toned.has(i) ? paint(options.color, tone, t) : t))
    return painted.join("  ") + "  " + truncate(texts[texts.length - 1]!, room)
  }
  return {
    header: paint(options.color, "bold", line(headers, undefined, new Set()).trimEnd()),
    // the glyph and the status take the row's tone
    rows: cells.map(({ look, texts }) => line(texts, look.tone, new Set([0, 3])))
  }
}

export const problems = (supervisors: ReadonlyArray<SupervisorView>) =>
  supervisors.flatMap((v) =>
    v.state === "unreachable"
      ? [`supervisor ${v.supervisor.pid} (${oneLine(v.supervisor.name)}) does not answer: ${v.problem ?? "unknown reason"}`]
      : []
  )

export const summary = (snapshot: Snapshot) => {
  const running = snapshot.shells.filter((s) => lookOf(s).glyph === "▶").length
  const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`
  return `${count(snapshot.shells.length, "shell")} (${running} running), ${count(snapshot.supervisors.length, "supervisor")}`
}
