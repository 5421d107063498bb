/**
 * Output as a model reads it: each line as a terminal would leave it on
 * screen. A progress bar redraws its line with a carriage return, once per
 * step (`pip`, `curl`, `wget`, `docker`, test runners), whether its output
 * is a terminal or a pipe; kept as written, a result held every step of
 * every bar, and its cap cut the lines that came after them. The buffer
 * keeps the bytes as written, for `corral logs`, `show` and `attach`;
 * `corral top` shows each of its lines through this too.
 *
 * @since 0.1.0
 */

/**
 * Escape sequences a terminal acts on instead of showing (colours, cursor
 * moves, titles, modes), but those that erase within a line. A title (OSC)
 * ends at its terminator or its line's end: one cut off by a read is removed
 * too, and never takes the lines after it.
 */
const escapes = /\u001b\[(?![012]?K)[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b\n]*(?:\u0007|\u001b\\)?|\u001b[@-Z\\-_]/g

/** What moves the cursor within a line, or erases part of it. */
const lineControls = /(\r|\u0008|\u001b\[[012]?K)/

/** Whether text holds any of them. */
const anyControl = /\r|\u0008|\u001b\[[012]?K/

/**
 * The output as a terminal would show it: a carriage return goes back to
 * the line's start, a backspace one column back, an erase in line (`ESC[K`,
 * `ESC[1K`, `ESC[2K`) clears what it says, and what follows overwrites what
 * is under the cursor, so `\r\n` ends a line as `\n` does. A terminal's
 * other escape sequences are removed; a pipe's are left, as a program that
 * writes them to a pipe means them to be read.
 *
 * @since 0.1.0
 */
export const screenText = (text: string, tty: boolean | undefined): string => {
  const shown = tty === true ? text.replace(escapes, "") : text
  // most output has none: one scan, and it is returned as it is
  if (!anyControl.test(shown)) return shown
  return shown.split("\n").map((line) => anyControl.test(line) ? landedLine(line) : line).join("\n")
}

/**
 * One line (no `\n` in it), as it lands on screen. Written cell by cell into
 * one array, so the work is linear in what the line holds: a string rebuilt
 * at each redraw took 39 s for 64,000 one-character redraws over a
 * 128 KiB line, and a supervisor's event loop with it.
 */
const landedLine = (line: string): string => {
  // a line that ends in `\r\n`, the usual case by far, lands as it is without its `\r`
  if (line.indexOf("\r") === line.length - 1 && !anyControl.test(line.slice(0, -1))) return line.slice(0, -1)
  return land(line).cells.join("")
}

/** The cells a line leaves on screen, and where the cursor stands after it. */
const land = (line: string): { readonly cells: Array<string>; readonly column: number } => {
  const cells: Array<string> = []
  let column = 0
  for (const token of line.split(lineControls)) {
    if (token === "\r") column = 0
    else if (token === "\u0008") column = Math.max(0, column - 1)
    else if (token.startsWith("\u001b")) erase(cells, column, token)
    else if (token !== "") {
      for (let i = cells.length; i < column; i++) cells[i] = " "
      for (let i = 0; i < token.length; i++) cells[column++] = token[i]!
    }
  }
  return { cells, column }
}

/** Output rendered as it comes, piece by piece: see `makeScreen`. */
export interface Screen {
  /** Renders `text` after what came before; returns the lines it completed, each with its `\n`. */
  readonly push: (text: string) => string
  /** The line still unfinished (no `\n` after it), as it stands. */
  readonly end: () => string
}

/** How much of an unfinished line is held as written before it is held as it stands on screen. */
const MAX_HELD_CHARS = 16_384

/** An escape sequence is at most this long: one cut off at the end of a piece is held as written. */
const MAX_ESCAPE_CHARS = 64

/**
 * `screenText` for output that comes piece by piece, for a keeper of its
 * head and tail: fed raw, a keeper counted every step of a progress bar,
 * and a long bar took its head and tail from the lines around it. Complete
 * lines come out as `screenText` renders them. The line still being
 * written is held; once it runs past `MAX_HELD_CHARS` (a bar redrawn for
 * minutes), it is held as it stands on screen, its cursor too, so a bar
 * takes the room of one line. A line longer than that on screen is let go
 * as it stands, and what follows starts a line of its own.
 *
 * @since 0.1.0
 */
export const makeScreen = (tty: boolean | undefined): Screen => {
  let line = ""
  /** Holds the unfinished line, kept short; returns what it let go of. */
  const keep = (text: string): string => {
    line = text
    if (text.length <= MAX_HELD_CHARS) return ""
    // an escape sequence cut off at the piece's end stays as written, for the rest of it to complete
    const esc = text.lastIndexOf("\u001b")
    const at = esc >= 0 && text.length - esc <= MAX_ESCAPE_CHARS ? esc : text.length
    const { cells, column } = land(tty === true ? text.slice(0, at).replace(escapes, "") : text.slice(0, at))
    const shown = cells.join("")
    // written again from the line's start up to the cursor: the same cells, the cursor where it was
    line = shown + (column < shown.length ? "\r" + shown.slice(0, column) : "") + text.slice(at)
    if (line.length <= MAX_HELD_CHARS) return ""
    line = text.slice(at)
    return shown
  }
  return {
    push: (text) => {
      const end = text.lastIndexOf("\n")
      if (end < 0) return keep(line + text)
      const done = screenText(line + text.slice(0, end + 1), tty)
      return done + keep(text.slice(end + 1))
    },
    end: () => {
      const rest = screenText(line, tty)
      line = ""
      return rest
    }
  }
}

/** What an erase in line leaves; the cursor does not move. */
const erase = (cells: Array<string>, column: number, control: string): void => {
  switch (control) {
    case "\u001b[2K":
      cells.length = 0
      return
    case "\u001b[1K":
      cells.fill(" ", 0, Math.min(column + 1, cells.length))
      return
    default:
      cells.length = Math.min(column, cells.length)
  }
}
