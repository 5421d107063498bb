/**
 * `corral attach ID`: this terminal connected to a background shell. What is
 * typed goes to the shell's stdin through its supervisor's control socket
 * (as the `write_stdin` tool delivers it), and the shell's output comes back,
 * until the output ends or the user detaches.
 */
import { StringDecoder } from "node:string_decoder"
import type { TerminalSize } from "@corral/core/Shell"
import { MAX_TERMINAL_SIZE } from "@corral/core/Shell"
import { ControlClient, OutputUnavailable } from "./internal/controlClient.js"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import { followShell } from "./internal/followShell.js"
import { printError, writeOut } from "./internal/stdio.js"
import * as Table from "./internal/table.js"
import * as TableCommand from "./internal/tableCommand.js"

export const usage = `usage: corral attach ID

Connects to a background shell: what you type goes to its stdin, and its
output comes here, from what its supervisor retained on, until the shell's
output ends (it exited, or was stopped) or you detach. The shell goes on
after you detach. ID is <supervisor pid>:<shell id> as \`corral ls\` prints
it, like 4242:s1.

A shell started with a terminal (the bash tool's tty: true), attached from
a terminal: every key goes to the shell's terminal as you type it, so
Ctrl-C, Ctrl-Z and Ctrl-D act there as they would in it. Ctrl-] detaches.
The shell's terminal takes the size of yours, at once and whenever yours
is resized, and keeps the last one after you detach.

Any other shell, or input that is not a terminal: your input is sent as
you enter each line, echoed and edited by your own terminal. Ctrl-C is
passed on (SIGINT to the shell's process group, as the terminal it lacks
would send). Ctrl-D, or the end of piped input, detaches and leaves the
shell's stdin open; so does a line with Ctrl-] on it.

options:
  -h, --help  print this help

Exit status: 0 once detached or the shell's output ended, 1 when the shell
or its supervisor cannot be found or reached, or the shell takes no input,
125 for bad usage.
`

/** Ctrl-]: telnet's and docker's escape, and a key no shell needs. */
const DETACH = "\u001d"

type Chunk = { readonly _tag: "Text"; readonly text: string } | { readonly _tag: "End" }

/**
 * Standard input as text chunks, raw (key by key) when `raw`; the terminal
 * is put back as it was when the scope closes.
 */
const keyboard = (raw: boolean) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const chunks = yield* Queue.unbounded<Chunk>()
      const decoder = new StringDecoder("utf8")
      const stdin = process.stdin
      if (raw) stdin.setRawMode(true)
      stdin.on("data", (bytes: Buffer) => Queue.unsafeOffer(chunks, { _tag: "Text", text: decoder.write(bytes) }))
      stdin.once("end", () => Queue.unsafeOffer(chunks, { _tag: "End" }))
      stdin.resume()
      return chunks
    }),
    () =>
      Effect.sync(() => {
        if (raw && process.stdin.isTTY) process.stdin.setRawMode(false)
        // nothing more is read: the process may exit
        process.stdin.pause()
        process.stdin.destroy()
      })
  )

/** SIGINT and the signals that end a terminal session, while the scope lasts. */
const signals = (onInterrupt: () => void, onEnd: () => void) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      process.on("SIGINT", onInterrupt)
      for (const s of ["SIGTERM", "SIGHUP"] as const) process.on(s, onEnd)
    }),
    () =>
      Effect.sync(() => {
        process.off("SIGINT", onInterrupt)
        for (const s of ["SIGTERM", "SIGHUP"] as const) process.off(s, onEnd)
      })
  )

/** The size of this process's terminal, within the bounds of a shell's; none when stdout is not a terminal. */
const ownSize = (): Option.Option<TerminalSize> => {
  const { columns, isTTY, rows } = process.stdout
  if (isTTY !== true || !(columns > 0 && rows > 0)) return Option.none()
  const within = (n: number) => Math.min(Math.max(Math.floor(n), 1), MAX_TERMINAL_SIZE)
  return Option.some({ cols: within(columns), rows: within(rows) })
}

/**
 * Gives the shell's terminal the size of ours, now and at each SIGWINCH
 * (Node's `resize` on stdout), in order, while the scope lasts. A resize that
 * fails is let go: the shell has ended, and its output says so.
 */
const followSize = (id: string) =>
  Effect.gen(function*() {
    const client = yield* ControlClient
    const sizes = yield* Queue.sliding<TerminalSize>(1)
    const offer = () => Option.map(ownSize(), (size) => Queue.unsafeOffer(sizes, size))
    offer()
    yield* Effect.acquireRelease(
      Effect.sync(() => process.stdout.on("resize", offer)),
      () => Effect.sync(() => process.stdout.off("resize", offer))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(sizes), (size) => Effect.ignore(client.resize(id, size)))))
  })

/** Sends what is typed, in order, until the user detaches (Ctrl-] or the end of input). */
const forward = (id: string, chunks: Queue.Dequeue<Chunk>) =>
  Effect.gen(function*() {
    const client = yield* ControlClient
    while (true) {
      const chunk = yield* Queue.take(chunks)
      if (chunk._tag === "End") return
      const at = chunk.text.indexOf(DETACH)
      const text = at < 0 ? chunk.text : chunk.text.slice(0, at)
      if (text !== "") yield* client.write(id, { text })
      if (at >= 0) return
    }
  })

const settled = (status: { readonly _tag: string }) => status._tag === "Exited" || status._tag === "Killed"

/**
 * One line on how the shell ended, once its output has. The output ends with
 * the leader's terminal or pipes; its supervisor settles its status a moment
 * later, once the group is empty: asked again for up to 3 s.
 */
const ending = (id: string) =>
  Effect.gen(function*() {
    const client = yield* ControlClient
    let shown = yield* Effect.option(client.show(id))
    for (let i = 0; i < 60 && Option.exists(shown, ({ entry }) => !settled(entry.info.status)); i++) {
      yield* Effect.sleep("50 millis")
      shown = yield* Effect.option(client.show(id))
    }
    const label = Option.match(shown, { onNone: () => "its output ended", onSome: ({ entry }) => Table.lookOf(entry).label })
    printError(`shell ${id} ended: ${label}`)
  })

const attach = (id: string) =>
  Effect.scoped(Effect.gen(function*() {
    const client = yield* ControlClient
    const { entry } = yield* client.show(id)
    if (entry.reach !== "live") return yield* new OutputUnavailable({ id, supervisor: entry.supervisor })
    const raw = entry.info.tty === true && process.stdin.isTTY === true
    const chunks = yield* keyboard(raw)
    if (raw) yield* followSize(id)
    const hungUp = yield* Deferred.make<void>()
    // without a terminal of our own in raw mode, Ctrl-C reaches us as SIGINT: passed on as the key
    yield* signals(() => Queue.unsafeOffer(chunks, { _tag: "Text", text: "\u0003" }), () => Deferred.unsafeDone(hungUp, Effect.void))
    // whichever ends first ends the attach; a failure to deliver input ends it with that failure
    const first = yield* Effect.raceFirst(
      Effect.as(forward(id, chunks), "detached" as const),
      Effect.raceFirst(Effect.as(Deferred.await(hungUp), "detached" as const), Effect.as(followShell(id), "ended" as const))
    )
    if (first === "ended") yield* ending(id)
    return 0
  }))

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("attach", argv, {})
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    const id = yield* TableCommand.oneId("attach", positionals)
    return yield* attach(id)
  })

/** Runs `corral attach` with the words after `attach`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("attach", program(argv), Layer.empty)
