/** What the handlers of one owner share. */
import * as path from "node:path"
import * as ProcessGroup from "@corral/core/ProcessGroup"

export interface Settings {
  readonly owner: string
  readonly cwd: string
  /** Cursor name for "what is new" reads: each owner reads at its own pace. */
  readonly reader: string
  /** Numbers foreground commands for their `CORRAL_SHELL_ID`. */
  readonly nextForeground: () => number
  /** True the first time only: a note about the shell is said once. */
  readonly firstShellNote: () => boolean
}

export const make = (options: { readonly owner?: string | undefined; readonly cwd?: string | undefined }): Settings => {
  const owner = options.owner ?? "agent"
  let foreground = 0
  let shellNoted = false
  return {
    owner,
    cwd: path.resolve(ProcessGroup.currentDirectory(), options.cwd ?? "."),
    reader: `tools:${owner}`,
    nextForeground: () => ++foreground,
    firstShellNote: () => !shellNoted && (shellNoted = true)
  }
}
