/**
 * Whether a command would run, found as execvp finds it. Where a wrapper
 * execs the command, spawn itself cannot say that the command is missing or
 * not executable, so a start asks here first. A bare name is looked up along
 * `PATH`, one stat per entry (about 60 µs apiece on the VMs corral is built
 * on, where `sh` is the seventh entry's). The file a command was found at is
 * remembered: the next start only checks that it is still executable
 * (`access`, a few µs, where a stat costs 50 and allocates a `Stats`).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { currentDirectory } from "./currentDirectory.js"

/**
 * Why the command cannot be run, as execvp would say it: ENOENT or EACCES;
 * for a path (one with a slash), what its lookup failed with (ELOOP,
 * ENAMETOOLONG, ENOTDIR), or EISDIR for a directory, where execve says
 * EACCES: each then names what is wrong.
 */
export type Missing = "ENOENT" | "EACCES" | "EISDIR" | "ELOOP" | "ENAMETOOLONG" | "ENOTDIR"

/** The file a command was last found at, by cwd, PATH (for a bare name) and name. Bounded: a start's commands are few. */
const found = new Map<string, string>()
const MAX_REMEMBERED = 64

/** True where `file` would run, "absent" where there is none, else why it would not. */
const runnable = (file: string): true | "absent" | Exclude<Missing, "ENOENT"> => {
  try {
    const stat = fs.statSync(file, { throwIfNoEntry: false })
    if (stat === undefined) return "absent"
    if (stat.isDirectory()) return "EISDIR"
    if (!stat.isFile()) return "EACCES"
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === "ELOOP" || code === "ENAMETOOLONG" || code === "ENOTDIR" ? code : "EACCES"
  }
}

/** `undefined` when `file` would run from `cwd` with this `PATH`, else why not. */
export const missing = (file: string, envPath: string | undefined, cwd: string | undefined): Missing | undefined => {
  const at = locate(file, envPath, cwd)
  return typeof at === "string" ? undefined : at.missing
}

/** The file `file` would run from `cwd` with this `PATH`, as an absolute path, else why it would not run. */
export const locate = (file: string, envPath: string | undefined, cwd: string | undefined): string | { readonly missing: Missing } => {
  const bare = !file.includes("/")
  const dirs = bare ? envPath ?? "/usr/local/bin:/usr/bin:/bin" : ""
  const key = `${cwd ?? ""}\0${dirs}\0${file}`
  // still executable: exec finds it, or (a bare name) an earlier entry's that also runs
  const known = found.get(key)
  if (known !== undefined && executable(known)) return known
  found.delete(key)
  const from = cwd ?? currentDirectory()
  const candidates = bare ? dirs.split(":").map((dir) => path.resolve(from, dir || ".", file)) : [path.resolve(from, file)]
  let code: Missing = "ENOENT"
  for (const candidate of candidates) {
    const verdict = runnable(candidate)
    if (verdict === "absent") continue
    if (verdict === true) {
      if (found.size >= MAX_REMEMBERED) found.clear()
      found.set(key, candidate)
      return candidate
    }
    // as execvp: a PATH entry we may not search, or a match we may not run, is EACCES unless a later one works
    code = bare ? "EACCES" : verdict
  }
  return { missing: code }
}

const executable = (file: string): boolean => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}
