/** Exit statuses as timeout(1) uses them, so scripts can treat corral run like it. */
import { constants } from "node:os"
import type { ExitStatus } from "@corral/core/ProcessGroup"

export const TimedOut = 124
/** corral's own failure: bad usage, bad duration, bad configuration, no process could be started. */
export const Failed = 125
export const CannotInvoke = 126
export const NotFound = 127

export const ofSignal = (signal: NodeJS.Signals): number => 128 + constants.signals[signal]

export const ofStatus = (status: ExitStatus): number =>
  status._tag === "Exited" ? status.code : ofSignal(status.signal)
