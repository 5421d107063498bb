/**
 * What corral logs (a journal it set aside, a watcher it replaced) goes to
 * stderr as one line: stdout is the command's output, `--json` included.
 */
import * as Logger from "effect/Logger"
import { printError } from "./stdio.js"

export const stderrLogger = Logger.make(({ logLevel, message }) => {
  const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
  printError(`${logLevel._tag === "Warning" ? "warning" : logLevel.label.toLowerCase()}: ${text}`)
})

/** Replaces the default logger, which writes to stdout. */
export const layer = Logger.replace(Logger.defaultLogger, stderrLogger)
