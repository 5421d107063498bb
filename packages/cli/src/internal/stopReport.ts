/** A stop report as one line a person can read at a glance. */
import type { StopReport } from "@corral/core/GroupStop"

const count = (n: number, noun: string, plural = `${noun}es`) => `${n} ${n === 1 ? noun : plural}`

const outcome = (report: StopReport, first: string): string =>
  report.members === 0
    ? "nothing was left running"
    : report.escalated
    ? `escalated to SIGKILL for ${report.killed} of ${count(report.members, "process")}`
    : `${first} sufficed, ${count(report.members, "process")}`

/** `first`: the signal the stop began with (`corral run -s`). */
export const format = (report: StopReport, first = "SIGTERM"): string => {
  const parts = [`stopped group ${report.pgid} (${report.containment}) in ${report.durationMs}ms: ${outcome(report, first)}`]
  if (report.escaped.length > 0) {
    parts.push(`${count(report.escaped.length, "process")} had left the session (setsid), signalled by pid: ${report.escaped.join(", ")}`)
  }
  if (report.survivors.length > 0) {
    parts.push(`${count(report.survivors.length, "process")} survived SIGKILL (uninterruptible sleep or no permission): ${report.survivors.join(", ")}`)
  }
  return parts.join("; ")
}
