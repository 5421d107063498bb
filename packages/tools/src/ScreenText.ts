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
  return cells.join("")
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
