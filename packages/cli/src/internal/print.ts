/**
 * corral's own short writes to stdout and stderr, with nothing but Node
 * loaded: `corral --help` and the dispatcher use them before any command
 * (and effect) is.
 *
 * stdout goes through `process.stdout`, which queues what the reader has not
 * taken yet. A raw `writeSync` cannot: effect's logger reads `process.stdout`
 * as it loads, which puts a pipe on stdout in non-blocking mode, and a write
 * then stops at what the pipe holds (64 KiB of `corral logs ID | less`).
 * A reader that leaves (`corral show ID | head`) ends the output: EPIPE is a
 * normal end, not a failure of corral, and the command keeps its exit status.
 *
 * stderr is written with `writeSync` on the raw descriptor: its lines are
 * short, and out before anything else can happen.
 */
import * as fs from "node:fs"

let out: NodeJS.WriteStream | undefined

/** stdout, with EPIPE and its like handled: the stream ends, and is then `destroyed`. */
export const stdout = (): NodeJS.WriteStream => (out ??= process.stdout.on("error", () => {}))

/** Queues a short text on stdout; the process does not exit before the reader took it or left. */
export const writeOut = (text: string): void => void stdout().write(text)

/** One line on stderr, prefixed so it stands out from the command's own output. */
export const printError = (message: string): void => {
  try {
    fs.writeSync(2, `corral: ${message}\n`)
  } catch {
    // a closed or broken stderr must not turn into a crash of corral
  }
}

/**
 * What a failure for want of one of the host's resources means, and what to
 * do about it: the machine's limits, not a bug of corral's. Undefined for
 * any other failure.
 */
export const exhaustion = (error: unknown): string | undefined => {
  switch ((error as NodeJS.ErrnoException | null)?.code) {
    case "EMFILE":
      return "this process has no file descriptor left (EMFILE: `ulimit -n` is reached): raise the limit or close some files"
    case "ENFILE":
      return "the system has no file descriptor left (ENFILE): close some files or raise fs.file-max"
    case "ENOMEM":
      return "not enough memory left (ENOMEM): stop some processes or add memory"
    default:
      return undefined
  }
}
