/**
 * What a shell's owner sends it: text to its stdin or the end of it, signals
 * to its group, a new size for its terminal; with the ownership check that
 * these requests and a kill pass first.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as MutableRef from "effect/MutableRef"
import type { Shell, Shells } from "./registryShells.js"
import type { TerminalSize } from "../Shell.js"
import { isActive } from "../Shell.js"

export class NotOwner extends Data.TaggedError("NotOwner")<{ readonly id: string; readonly owner: string; readonly caller: string }> {
  override get message() {
    return `shell ${this.id} belongs to "${this.owner}", not "${this.caller}": only its owner can stop it`
  }
}

/** The most a shell's stdin may hold unread before more text is refused: it is held in the supervisor's memory. */
export const MAX_STDIN_WAITING_BYTES = 1024 * 1024

/** The shell takes no input; with `waiting`, not until its command reads the bytes already waiting for it. */
export class NoStdin extends Data.TaggedError("NoStdin")<{ readonly id: string; readonly waiting?: number | undefined }> {
  override get message() {
    return this.waiting === undefined
      ? `shell ${this.id} takes no input: it was started without a stdin pipe (stdin: "pipe") or a terminal (tty), its stdin was closed, or it has ended`
      : `shell ${this.id} takes no more text until its command reads the ${this.waiting} bytes written before, still waiting in its stdin (at most ${MAX_STDIN_WAITING_BYTES} may wait)`
  }
}

export class NoTerminal extends Data.TaggedError("NoTerminal")<{ readonly id: string }> {
  override get message() {
    return `shell ${this.id} has no terminal to resize: it was started without tty, or it has ended`
  }
}

/**
 * Whether the shell still holds processes. One that has settled takes no
 * input, though its pipe or terminal may stay open a moment longer: under
 * pidns its status comes from the init's report, before `unshare` exits and
 * the terminal closes.
 */
const holds = (shell: Shell) => Effect.sync(() => isActive(MutableRef.get(shell.status)))

export const make = (shells: Shells) => {
  const owned = (id: string, caller: string) =>
    Effect.flatMap(shells.lookup(id), (shell) =>
      shell.base.owner === caller ? Effect.succeed(shell) : Effect.fail(new NotOwner({ id, owner: shell.base.owner, caller })))

  const write = Effect.fn("ShellRegistry.write")(function*(
    id: string,
    input: { readonly text?: string | undefined; readonly eof?: boolean | undefined },
    options: { readonly owner: string }
  ) {
    const shell = yield* owned(id, options.owner)
    // what waits is held here: a command that never reads would have it grow with every write
    const waiting = shell.group.stdinWaiting()
    if (waiting > MAX_STDIN_WAITING_BYTES && (input.text ?? "") !== "") return yield* new NoStdin({ id, waiting })
    if (!(yield* holds(shell)) || !(yield* shell.group.writeStdin(input))) return yield* new NoStdin({ id })
  })

  const signal = Effect.fn("ShellRegistry.signal")(function*(id: string, name: NodeJS.Signals, options: { readonly owner: string }) {
    const shell = yield* owned(id, options.owner)
    if (!(yield* holds(shell))) return
    // the group may have emptied since: nothing left to signal is no failure
    yield* shell.group.signal(name)
  })

  const resize = Effect.fn("ShellRegistry.resize")(function*(id: string, size: TerminalSize, options: { readonly owner: string }) {
    const shell = yield* owned(id, options.owner)
    if (!(yield* holds(shell)) || !(yield* shell.group.resize(size))) return yield* new NoTerminal({ id })
  })

  return { owned, write, signal, resize }
}
