/**
 * Output as a model reads it: each line as a terminal would leave it on
 * screen. A progress bar redraws its line with a carriage return, once per
 * step (`pip`, `curl`, `wget`, `docker`, test runners), whether its output
 * is a terminal or a pipe; kept as written, a result held every step of
 * every bar, and its cap cut the lines that came after them. The buffer
 * keeps the bytes as written, for `corral logs`, `show` and `attach`.
 */

/** Escape sequences a terminal acts on instead of showing (colours, cursor moves, titles, modes), but those that erase within a line. */
const escapes = /\u001b\[(?![012]?K)[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g

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
 */
export const screenText = (text: string, tty: boolean | undefined): string => {
  const shown = tty === true ? text.replace(escapes, "") : text
  // most output has none: one scan, and it is returned as it is
  if (!anyControl.test(shown)) return shown
  return shown.split("\n").map((line) => anyControl.test(line) ? landedLine(line) : line).join("\n")
}

/** One line (no `\n` in it), as it lands on screen. */
const landedLine = (line: string): string => {
  let shown = ""
  let column = 0
  for (const token of line.split(lineControls)) {
    if (token === "\r") column = 0
    else if (token === "\u0008") column = Math.max(0, column - 1)
    else if (token.startsWith("\u001b")) shown = erased(shown, column, token)
    else if (token !== "") {
      shown = shown.slice(0, column).padEnd(column) + token + shown.slice(column + token.length)
      column += token.length
    }
  }
  return shown
}

/** What an erase in line leaves; the cursor does not move. */
const erased = (shown: string, column: number, control: string): string => {
  switch (control) {
    case "\u001b[2K":
      return ""
    case "\u001b[1K":
      return " ".repeat(Math.min(column + 1, shown.length)) + shown.slice(column + 1)
    default:
      return shown.slice(0, column)
  }
}
