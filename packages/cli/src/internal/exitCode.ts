/** Exit statuses as timeout(1) uses them, so scripts can treat corral run like it. */
import { constants } from "node:os"
import type { ExitStatus } from "@corral/core/ProcessGroup"

export const TimedOut = 124
/** corral's own failure: bad usage, bad duration, bad configuration, no process could be started. */
export const Failed = 125
export const CannotInvoke = 126
export const NotFound = 127
/** CMD needed SIGKILL after a timeout: 128+9, as timeout(1) reports it even without --preserve-status. */
export const Killed = 128 + constants.signals.SIGKILL

export const ofSignal = (signal: NodeJS.Signals): number => 128 + constants.signals[signal]

export const ofStatus = (status: ExitStatus): number =>
  status._tag === "Exited" ? status.code : ofSignal(status.signal)

/** How `corral run` ends: with a code, or by dying of CMD's signal, as timeout(1) does when CMD was not timed out. */
export type Ending =
  | { readonly _tag: "Exit"; readonly code: number }
  | { readonly _tag: "Die"; readonly signal: number }

export const exit = (code: number): Ending => ({ _tag: "Exit", code })

/** After a timeout, as timeout(1): 124, or CMD's status with --preserve-status; 137 when CMD needed SIGKILL. */
export const afterTimeout = (status: ExitStatus | undefined, preserveStatus: boolean): number =>
  status === undefined
    ? TimedOut
    : status._tag === "Signaled" && status.signal === "SIGKILL"
    ? Killed
    : preserveStatus
    ? ofStatus(status)
    : TimedOut

/** CMD's own ending passed on: its code, or its death by the same signal. */
export const endingOf = (status: ExitStatus): Ending =>
  status._tag === "Exited" ? exit(status.code) : { _tag: "Die", signal: constants.signals[status.signal] }
