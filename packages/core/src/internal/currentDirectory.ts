/**
 * This process's working directory, which may have been removed under it.
 * Node's `process.cwd()` then throws, and so does every `path.resolve` of a
 * relative path.
 */
import * as fs from "node:fs"

/**
 * The working directory; where it was removed, its former path as Linux
 * shows it (`/tmp/x (deleted)`), in which nothing can be started, so a spawn
 * given it says the directory does not exist.
 */
export const currentDirectory = (): string => {
  try {
    return process.cwd()
  } catch {
    try {
      return fs.readlinkSync("/proc/self/cwd")
    } catch {
      // absolute, so that resolving against it never asks for the working directory again
      return "/(a removed working directory)"
    }
  }
}
