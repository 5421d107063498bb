/**
 * How a command line is run: which shell, and the environment that makes
 * programs behave under a pipe as they would at a terminal. Agents write
 * bash (`[[ ]]`, arrays, `set -o pipefail`), so the default is bash wherever
 * it is installed, whatever `$SHELL` says; `/bin/sh` (dash on Debian and
 * Ubuntu) only where there is no bash.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { currentDirectory } from "./internal/currentDirectory.js"

export interface CommandShell {
  /** The shell's path, run as `shell -c COMMAND`. */
  readonly path: string
  /** Set when the shell is not the one asked for or expected: one line, for the user or the model. */
  readonly note?: string | undefined
}

/** Where bash is looked for, in order; `$SHELL` is not consulted, so every user gets the same shell. */
export const bashCandidates: ReadonlyArray<string> = ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]

export const fallback = "/bin/sh"

const isExecutableFile = (file: string) => {
  try {
    if (!fs.statSync(file).isFile()) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first bash of `candidates`, else `/bin/sh` with a note saying what bash syntax will do there. */
export const resolveDefault = (candidates: ReadonlyArray<string> = bashCandidates): CommandShell => {
  const bash = candidates.find(isExecutableFile)
  return bash !== undefined ? { path: bash } : {
    path: fallback,
    note: `bash is not installed (looked for ${candidates.join(", ")}): commands run with ${fallback}, where bash syntax such as [[ ]] fails`
  }
}

/**
 * A shell given by path, or by name looked up in `PATH` as a shell would;
 * the reason it cannot run, as one line, otherwise.
 */
export const resolve = (given: string, env: Readonly<Record<string, string | undefined>> = process.env): CommandShell | string => {
  if (given.trim() === "") return "the shell is empty: pass a path such as /bin/bash, or leave it out for bash"
  if (given.includes("/")) {
    const file = path.resolve(currentDirectory(), given)
    return isExecutableFile(file) ? { path: file } : `${given} is not an executable file: pass the path of a shell such as /bin/bash`
  }
  const found = (env.PATH ?? "").split(":").filter((dir) => dir !== "").map((dir) => path.join(dir, given)).find(isExecutableFile)
  return found !== undefined ? { path: found } : `no ${given} in PATH: pass the path of a shell such as /bin/bash`
}

/**
 * Set in every command's environment (unless the caller's environment sets
 * them): programs whose output would sit in a block buffer until they exit
 * when stdout is a pipe write it as it comes, and nothing waits on a pager
 * or a prompt no one will answer.
 */
export const unbufferedEnv: Readonly<Record<string, string>> = {
  /** Python: stdout and stderr unbuffered. */
  PYTHONUNBUFFERED: "1",
  /** git, man, systemctl, psql and others: no pager holding the output. */
  PAGER: "cat",
  GIT_PAGER: "cat",
  /** git: fail at once instead of asking for a password on a terminal there is not. */
  GIT_TERMINAL_PROMPT: "0"
}

/** The entries of `unbufferedEnv` that `env` does not set: what a spawn extending `env` adds under the caller's own. */
export const unbufferedUnset = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const unset: Record<string, string> = {}
  for (const [name, value] of unbufferedEntries) if (env[name] === undefined) unset[name] = value
  return unset
}

// listed once: every start asks
const unbufferedEntries = Object.entries(unbufferedEnv)

/** `unbufferedEnv` under `env`: what the caller sets wins. */
export const environment = (env: Readonly<Record<string, string | undefined>>): Record<string, string | undefined> => ({
  ...unbufferedEnv,
  ...env
})
