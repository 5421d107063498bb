/** How the tools word statuses, durations and stops, and the metadata next to them. */
import * as DurationInput from "@corral/core/DurationInput"
import { ContainmentBackend, SignalName, StopReport } from "@corral/core/Shell"
import type { ExitStatus, ShellInfo, ShellStatus, StopCause } from "@corral/core/Shell"
import * as Schema from "effect/Schema"

export const duration = (ms: number): string => DurationInput.format(Math.max(0, ms))

export const count = (n: number, noun: string, plural = `${noun}es`) => `${n} ${n === 1 ? noun : plural}`

const stoppedBy: Record<StopCause, string> = {
  request: "stopped on request",
  lifetime: "stopped on reaching the shell lifetime limit",
  shutdown: "stopped at shutdown"
}

export const exitText = (exit: ExitStatus): string =>
  exit._tag === "Exited" ? `exited with code ${exit.code}` : `killed by ${exit.signal}`

/** `running`, `exited with code N`, `killed by SIGTERM (stopped on request)`, ... */
export const statusText = (status: ShellStatus): string => {
  switch (status._tag) {
    case "Running":
      return "running"
    case "Lingering":
      return `running: the command ${exitText(status.exit)}, but ${count(status.members, "process")} it started still run`
    case "Stopping":
      return "stopping"
    case "Exited":
      return `exited with code ${status.code}`
    case "Killed":
      return `killed by ${status.signal}${status.by === undefined ? "" : ` (${stoppedBy[status.by]})`}`
  }
}

export const elapsedMs = (info: ShellInfo, now: number) => (info.endedAt ?? now) - info.startedAt

/** The status with how long it has run, or ran: `running for 2m10s`, `exited with code 0 after 3.1s`. */
export const statusWithTime = (info: ShellInfo, now: number): string => {
  const time = duration(elapsedMs(info, now))
  return info.endedAt === undefined ? `${statusText(info.status)}, for ${time}` : `${statusText(info.status)} after ${time}`
}

export const statusLine = (info: ShellInfo, now: number) => `[status: ${statusWithTime(info, now)}]`

/**
 * What a result's metadata (MCP `_meta`) says about one shell, declared once
 * from the `Shell` schemas. Flat and snake_case, as tool results are; times as
 * ISO strings. A status added to `ShellStatus` fails to compile
 * here until `state` takes it.
 */
export const ShellMetadata = Schema.Struct({
  shell_id: Schema.String,
  command: Schema.String,
  name: Schema.optional(Schema.String),
  cwd: Schema.String,
  pid: Schema.Number,
  owner: Schema.String,
  containment: Schema.optional(ContainmentBackend),
  /** True for a shell on a pseudo-terminal (`tty: true`). */
  tty: Schema.optional(Schema.Boolean),
  state: Schema.Literal("Running", "Lingering", "Stopping", "Exited", "Killed"),
  /** The status in words: `exited with code 0`. */
  status: Schema.String,
  exit_code: Schema.optional(Schema.Number),
  signal: Schema.optional(SignalName),
  started_at: Schema.String,
  ended_at: Schema.optional(Schema.String),
  elapsed_ms: Schema.Number
})

export const shellMetadata = (info: ShellInfo, now: number): typeof ShellMetadata.Type => ({
  shell_id: info.id,
  command: info.command,
  name: info.name,
  cwd: info.cwd,
  pid: info.pid,
  owner: info.owner,
  containment: info.containment,
  tty: info.tty,
  state: info.status._tag,
  status: statusText(info.status),
  exit_code: info.status._tag === "Exited" ? info.status.code : undefined,
  signal: info.status._tag === "Killed" ? info.status.signal : undefined,
  started_at: new Date(info.startedAt).toISOString(),
  ended_at: info.endedAt === undefined ? undefined : new Date(info.endedAt).toISOString(),
  elapsed_ms: elapsedMs(info, now)
})

/** How a stop went: `SIGTERM sufficed` or why it escalated, and what could not be contained. */
export const stopText = (report: StopReport, grace: string): string => {
  const how = report.escalated
    ? `it escalated to SIGKILL because something ignored SIGTERM for the ${grace} grace period`
    : "SIGTERM sufficed"
  const notes = [
    report.escaped.length > 0
      ? `${count(report.escaped.length, "process")} had left the process group with setsid and ${report.escaped.length === 1 ? "was" : "were"} signalled by pid`
      : undefined,
    report.survivors.length > 0
      ? `${count(report.survivors.length, "process")} survived SIGKILL (pids ${report.survivors.join(", ")}: uninterruptible sleep or no permission)`
      : undefined
  ].filter((n) => n !== undefined)
  return [how, ...notes].join("; ")
}

/** What a result's metadata says about a stop (from its `StopReport`). */
export const StopMetadata = Schema.Struct({
  processes: StopReport.fields.members,
  escalated: StopReport.fields.escalated,
  duration_ms: StopReport.fields.durationMs,
  escaped: StopReport.fields.escaped,
  survivors: StopReport.fields.survivors
})

export const stopMetadata = (report: StopReport): typeof StopMetadata.Type => ({
  processes: report.members,
  escalated: report.escalated,
  duration_ms: report.durationMs,
  escaped: report.escaped,
  survivors: report.survivors
})

/** Bytes the output buffer dropped before a reader got to them, and what to do about it. */
export const droppedNote = (dropped: number, bufferBytes: number, advice: string) =>
  `[note: ${dropped} bytes of output were dropped before you read them: only the last ${
    Math.round(bufferBytes / 1024)
  } KiB are kept. ${advice}]`
