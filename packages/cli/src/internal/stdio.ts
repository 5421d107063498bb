/**
 * Writes to corral's own stdout and stderr with `writeSync` on the raw file
 * descriptors. `process.stdout`/`process.stderr` would put the descriptors in
 * non-blocking mode, a flag shared with the child that inherited them: a
 * child writing to that pipe would then fail with EAGAIN.
 */
import * as fs from "node:fs"

const write = (fd: number, text: string): void => {
  try {
    fs.writeSync(fd, text)
  } catch {
    // a closed or broken stdout/stderr must not turn into a crash of corral
  }
}

export const writeOut = (text: string): void => write(1, text)

/** One line on stderr, prefixed so it stands out from the command's own output. */
export const printError = (message: string): void => write(2, `corral: ${message}\n`)
