/**
 * Input to a background shell as a person at a terminal would give it, for
 * the `write_stdin` tool and `corral attach` alike.
 *
 * A shell on a terminal (`tty`) gets the text as typed: its terminal echoes
 * it, edits lines, and turns Ctrl-C into SIGINT for whichever job is in the
 * foreground, as at any terminal. A shell on a pipe has no terminal to do
 * that, so a control key sent alone acts as a terminal would make it act:
 * Ctrl-C, Ctrl-\ and Ctrl-Z signal the shell's whole process group, and
 * Ctrl-D closes its stdin.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { NoStdin, NotOwner, UnknownShell } from "./ShellRegistry.js"
import { ShellRegistry } from "./ShellRegistry.js"

// declared once, as schemas, in Shell.ts: the control endpoint carries them
export type { Delivered, Input } from "./Shell.js"
import type { Delivered, Input } from "./Shell.js"

/** Control keys a terminal's line discipline turns into signals. */
export const signalKeys: Readonly<Record<string, { readonly signal: NodeJS.Signals; readonly key: string }>> = {
  "\u0003": { signal: "SIGINT", key: "Ctrl-C" },
  "\u001c": { signal: "SIGQUIT", key: "Ctrl-\\" },
  "\u001a": { signal: "SIGTSTP", key: "Ctrl-Z" }
}

/** Ctrl-D: end of file at a terminal. */
export const EOF_KEY = "\u0004"

/** Names a lone control key (`Ctrl-C`), for messages; undefined for anything else. */
export const keyName = (text: string): string | undefined =>
  text.length === 1 && text.charCodeAt(0) >= 1 && text.charCodeAt(0) <= 26 && text !== "\n" && text !== "\t" && text !== "\r"
    ? `Ctrl-${String.fromCharCode(64 + text.charCodeAt(0))}`
    : signalKeys[text]?.key

/**
 * Delivers `input` to shell `id`; only the shell's owner may. On a pipe, it
 * returns once the command has read the text, or after `within` with the
 * rest still queued for it (`waiting`): a command that never reads its
 * input held a `write_stdin` of 300,000 characters until the shell ended.
 */
export const send = Effect.fn("ShellInput.send")(function*(
  id: string,
  input: Input,
  options: { readonly owner: string; readonly within?: Duration.DurationInput | undefined }
): Effect.fn.Return<Delivered, SendError, ShellRegistry> {
  const registry = yield* ShellRegistry
  const info = yield* registry.info(id)
  const text = input.text ?? ""
  if (info.tty === true) {
    yield* registry.write(id, input, options)
    return { _tag: "Written", chars: text.length, eof: input.eof === true, tty: true } satisfies Delivered
  }
  const control = signalKeys[text]
  if (control !== undefined) {
    yield* registry.signal(id, control.signal, options)
    return { _tag: "Signaled", ...control } satisfies Delivered
  }
  const eof = input.eof === true || text === EOF_KEY
  const written = text === EOF_KEY ? "" : text
  const write = registry.write(id, { text: written, eof }, options)
  const taken = options.within === undefined ? yield* Effect.as(write, true) : Option.isSome(yield* Effect.timeoutOption(write, options.within))
  return { _tag: "Written", chars: written.length, eof, tty: false, ...(taken ? {} : { waiting: true }) } satisfies Delivered
})

export type SendError = UnknownShell | NotOwner | NoStdin
