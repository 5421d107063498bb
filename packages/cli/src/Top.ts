/**
 * `corral top`: the table of `corral ls`, full screen and refreshed every
 * second. Enter attaches to the selected shell's live output; Esc or q goes
 * back. The terminal is restored however top ends: q, Ctrl-C, a signal, or
 * a crash.
 */
import * as fs from "node:fs"
import * as tty from "node:tty"
import { ControlClient } from "./internal/controlClient.js"
import * as Terminal from "@effect/platform/Terminal"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Mailbox from "effect/Mailbox"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as ExitCode from "./internal/exitCode.js"
import * as Signals from "./internal/signals.js"
import { writeOut } from "./internal/stdio.js"
import * as TableCommand from "./internal/tableCommand.js"
import * as Screen from "./internal/topScreen.js"
import type { Command, Event, Size, State } from "./internal/topState.js"
import * as TopState from "./internal/topState.js"
import { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral top

A live view of \`corral ls\`: every background shell on this machine,
refreshed every second.

keys:
  ↑ ↓ or k j   select a shell
  Enter        attach to its output, live
  Esc or q     back to the table
  q, Ctrl-C    quit

options:
  -h, --help  print this help
`

const sizeOf = (): Size => ({ columns: process.stdout.columns, rows: process.stdout.rows })

const restore = () => fs.writeSync(1, Screen.leave)

/** The alternate screen for the scope; a crash that escapes Effect still restores it on exit. */
const fullScreen = Effect.acquireRelease(
  Effect.sync(() => {
    fs.writeSync(1, Screen.enter)
    process.once("exit", restore)
  }),
  () =>
    Effect.sync(() => {
      process.off("exit", restore)
      restore()
    })
)

const onResize = (events: Queue.Enqueue<Event>) => {
  const resized = () => events.unsafeOffer({ _tag: "Resized", size: sizeOf() })
  return Effect.acquireRelease(
    Effect.sync(() => process.stdout.on("resize", resized)),
    () => Effect.sync(() => process.stdout.off("resize", resized))
  )
}

/** Keys until the terminal's input ends: Ctrl-C ends it. */
const readKeys = (events: Queue.Enqueue<Event>) =>
  Effect.gen(function*() {
    const input = yield* (yield* Terminal.Terminal).readInput
    yield* Mailbox.toStream(input).pipe(Stream.runForEach((key) => events.offer({ _tag: "Key", name: key.key.name })))
    yield* events.offer({ _tag: "Quit" })
  })

const refresh = (events: Queue.Enqueue<Event>) =>
  Effect.gen(function*() {
    const snapshot = yield* (yield* ControlClient).snapshot
    yield* events.offer({ _tag: "Refreshed", snapshot, now: yield* Clock.currentTimeMillis })
  }).pipe(Effect.repeat(Schedule.spaced("1 second")))

const follow = (id: string, events: Queue.Enqueue<Event>) =>
  Effect.flatMap(ControlClient, (client) =>
    client.follow(id).pipe(
      Stream.decodeText(),
      Stream.runForEach((text) => events.offer({ _tag: "Output", id, text })),
      Effect.as("output ended"),
      Effect.catchAll((error) => Effect.succeed(error.message)),
      Effect.flatMap((reason) => events.offer({ _tag: "OutputEnded", id, reason }))
    ))

const view = Effect.gen(function*() {
  const events = yield* Queue.unbounded<Event>()
  const attachment = yield* FiberHandle.make()
  const color = TableCommand.useColor(1)
  yield* fullScreen
  yield* onResize(events)
  yield* Effect.forkScoped(readKeys(events))
  yield* Effect.forkScoped(refresh(events))
  const perform = (command: Command) => {
    switch (command._tag) {
      case "Attach":
        return FiberHandle.run(attachment, follow(command.id, events))
      case "Detach":
        return FiberHandle.clear(attachment)
      default:
        return Effect.void
    }
  }
  let state: State = TopState.initial(sizeOf())
  for (;;) {
    fs.writeSync(1, Screen.draw(Screen.frame(state, color)))
    // everything that happened since the last frame, drawn once
    const [first, rest] = [yield* Queue.take(events), yield* Queue.takeAll(events)]
    for (const event of [first, ...rest]) {
      const [next, command] = TopState.update(state, event)
      if (command._tag === "Quit") return 0
      state = next
      yield* perform(command)
    }
  }
}).pipe(Effect.scoped)

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("top", argv, {})
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    if (positionals.length > 0) return yield* new UsageError({ message: `top takes no arguments, got ${positionals.join(" ")}` })
    if (!tty.isatty(0) || !tty.isatty(1)) {
      return yield* new UsageError({ message: "top needs a terminal: in a pipe or a script, use `corral ls` or `corral ls --json`" })
    }
    const signalled = yield* Signals.listen(Signals.terminationSignals)
    return yield* Effect.raceFirst(view, Effect.map(signalled, ExitCode.ofSignal))
  }).pipe(Effect.scoped)

/** Runs `corral top` with the words after `top`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("top", program(argv), NodeTerminal.layer)
