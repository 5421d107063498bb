/**
 * Notices of the owner's shells that ended, or whose leader exited while
 * members of its group still run, carried by the next tool result so the
 * model need not poll. The registry's events queue up from the moment the
 * handlers start; each result drains them, so a notice is never lost, however
 * many shells end at once, and is given once.
 */
import type { ShellEvent, ShellInfo } from "@corral/core/ShellRegistry"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type { ToolResult } from "../ToolResult.js"
import { ToolError } from "../ToolResult.js"
import * as Format from "./format.js"

export interface Notice {
  readonly shell_id: string
  readonly text: string
  readonly state: ShellInfo["status"]["_tag"]
  readonly exit_code?: number | undefined
  readonly signal?: string | undefined
  /** Lines kept that the owner has not read with bash_output. */
  readonly unread_lines?: number | undefined
  /** Processes of the group still running after its leader exited. */
  readonly running?: number | undefined
}

const shortCommand = (command: string) => (command.length <= 60 ? command : `${command.slice(0, 59)}…`)

/** What happened to the shell, in one line; `unread` is left out once its output is gone. */
export const noticeText = (info: ShellInfo, now: number, unread: number | undefined): string => {
  const who = `shell ${info.id} (${shortCommand(info.command)})`
  const lines = unread === undefined ? "" : `; ${Format.count(unread, "line", "lines")} unread`
  const status = info.status
  switch (status._tag) {
    case "Lingering":
      return `${who}: leader ${Format.exitText(status.exit)}; ${Format.count(status.members, "process")} of the group still running${lines}`
    case "Exited":
    case "Killed":
      return `${who} ${Format.statusWithTime(info, now)}; finished: the group is empty${lines}`
    default:
      return `${who} ${Format.statusText(status)}${lines}`
  }
}

export const make = (owner: string, reader: string) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const events = yield* registry.subscribeQueue
    // the latest news of each shell not yet told, in the order they ended
    const pending = new Map<string, ShellInfo>()

    const collect = (event: ShellEvent) => {
      if (event._tag === "Started" || event._tag === "Dropped") return
      if (event.info.owner !== owner) return
      pending.delete(event.info.id)
      pending.set(event.info.id, event.info)
    }

    const noticeOf = (info: ShellInfo, now: number) =>
      Effect.map(Effect.option(registry.unread(info.id, reader)), (unread): Notice => {
        const lines = unread._tag === "Some" ? unread.value : undefined
        return {
          shell_id: info.id,
          text: noticeText(info, now, lines),
          state: info.status._tag,
          exit_code: info.status._tag === "Exited" ? info.status.code : undefined,
          signal: info.status._tag === "Killed" ? info.status.signal : undefined,
          unread_lines: lines,
          running: info.status._tag === "Lingering" ? info.status.members : undefined
        }
      })

    /** The notices not yet given, except those about `told`: shells whose status the result states already. */
    const take = (told: (id: string) => boolean) =>
      Effect.gen(function*() {
        // handlers kept past the scope they were built in have no events left to take
        if (!(yield* Queue.isShutdown(events))) for (const event of yield* Queue.takeAll(events)) collect(event)
        const now = yield* Clock.currentTimeMillis
        const due = [...pending.values()].filter((info) => !told(info.id))
        pending.clear()
        return yield* Effect.forEach(due, (info) => noticeOf(info, now))
      })

    return { take }
  })

const lines = (due: ReadonlyArray<Notice>) => due.map((n) => `[notice: ${n.text}]`).join("\n")

export const addTo = (result: ToolResult, due: ReadonlyArray<Notice>): ToolResult =>
  due.length === 0 ? result : { text: `${result.text}\n${lines(due)}`, metadata: { ...result.metadata, notices: due } }

export const addToError = (error: ToolError, due: ReadonlyArray<Notice>): ToolError =>
  due.length === 0 ? error : new ToolError({ reason: error.reason, message: `${error.message}\n${lines(due)}` })

export type Notices = Effect.Effect.Success<ReturnType<typeof make>>
