/**
 * Turns signals into values, so that they no longer kill corral. For
 * `corral run`, also: the ones it passes on to CMD, the ones its caller
 * ignored, the `-s` operand, and dying of CMD's signal.
 */
import { constants } from "node:os"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"

/**
 * What corral passes on to CMD's group, as timeout(1) passes on the
 * terminating signals it gets. SIGALRM is timeout's own timer: received, it
 * times CMD out. SIGWINCH is corral's addition: CMD's session has no
 * terminal, so a window resize reaches it only this way.
 */
export const forwarded: ReadonlyArray<NodeJS.Signals> = [
  "SIGINT",
  "SIGTERM",
  "SIGHUP",
  "SIGQUIT",
  "SIGUSR1",
  "SIGUSR2",
  "SIGALRM",
  "SIGWINCH"
]

/**
 * Job control: SIGTSTP (Ctrl-Z at a shell prompt) stops CMD's group and
 * then corral; SIGCONT (`fg`, `bg`) resumes the group with corral. CMD's
 * session has no terminal, so without this Ctrl-Z would stop corral alone.
 */
export const jobControl: ReadonlyArray<NodeJS.Signals> = ["SIGTSTP", "SIGCONT"]

/** Stops corral as SIGTSTP would have, had it not been caught: SIGSTOP cannot be caught. */
export const suspendSelf = (): void => void process.kill(process.pid, "SIGSTOP")

/** Signals whose default action dumps core: dying of one would leave a core of corral (Node cannot turn dumps off). */
const dumpsCore: ReadonlySet<number> = new Set(
  (["SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGXCPU", "SIGXFSZ", "SIGSYS"] as const).map((s) => constants.signals[s])
)

// the first name of each number: SIGABRT before its alias SIGIOT, SIGIO before SIGPOLL
const byNumber = new Map<number, NodeJS.Signals>(
  Object.entries(constants.signals).reverse().map(([name, n]) => [n, name as NodeJS.Signals])
)

/** glibc's real-time range on Linux; 32 and 33 belong to the threads library. */
const RTMIN = 34
const RTMAX = 64

/** A signal as `kill -l` names it without SIG: `TERM`, `RTMIN+2`, `0`. */
export const nameOf = (signal: number): string => {
  if (signal === 0) return "0"
  const name = byNumber.get(signal)
  if (name !== undefined) return name.slice(3)
  if (signal === RTMAX) return "RTMAX"
  return signal >= RTMIN && signal < RTMAX ? `RTMIN${signal === RTMIN ? "" : `+${signal - RTMIN}`}` : String(signal)
}

/** A signal as Node names it (`SIGTERM`), or by `nameOf` where Node has no name (`RTMIN+1`). */
export const fullName = (signal: NodeJS.Signals | number): string =>
  typeof signal === "string" ? signal : byNumber.get(signal) ?? nameOf(signal)

/** What `process.kill` takes for it: the name where Node has one, else the number. */
export const toNode = (signal: number): NodeJS.Signals | number => byNumber.get(signal) ?? signal

const isValid = (n: number) => n === 0 || byNumber.has(n) || (n >= RTMIN && n <= RTMAX)

const byName = (upper: string): number | undefined => {
  if (/^\d+$/.test(upper)) return Number(upper)
  if (upper === "EXIT") return 0
  if (upper === "CLD") return constants.signals.SIGCHLD
  const rt = /^RTM(IN|AX)([+-]\d+)?$/.exec(upper)
  if (rt !== null) {
    const offset = Number(rt[2] ?? 0)
    const n = rt[1] === "IN" ? RTMIN + offset : RTMAX + offset
    return (rt[1] === "IN" ? offset >= 0 : offset <= 0) && n >= RTMIN && n <= RTMAX ? n : undefined
  }
  return constants.signals[`SIG${upper}` as NodeJS.Signals]
}

/**
 * The `-s` operand, as timeout(1) reads it: a name with or without SIG, in
 * any case (`term`, `SIGTERM`, `RTMIN+1`), or a number, which may be a
 * shell's 128+N (`130` is INT). Undefined when it names no signal.
 */
export const parse = (operand: string): number | undefined => {
  let n: number | undefined
  if (/^\d/.test(operand)) {
    if (!/^\d+$/.test(operand) || Number(operand) > 2 ** 31 - 1) return undefined
    n = Number(operand)
    n &= n >= 0xff ? 0xff : 0x7f
  } else {
    const upper = operand.toUpperCase()
    n = byName(upper) ?? (upper.startsWith("SIG") ? byName(upper.slice(3)) : undefined)
  }
  return n !== undefined && isValid(n) ? n : undefined
}

/**
 * The signals that were ignored when corral started. Node resets every
 * ignored disposition before any JavaScript runs, so its own
 * /proc/self/status no longer shows them: corral's launcher (bin/corral.js)
 * reads SigIgn first and passes it on as `CORRAL_SIGIGN=<pid>:<mask>`. The
 * pid must be ours, so a value inherited from an outer corral is not taken.
 * Read once, and removed from the environment CMD inherits.
 */
export const ignoredAtStart = (): ReadonlySet<number> => {
  const passed = process.env.CORRAL_SIGIGN
  delete process.env.CORRAL_SIGIGN
  const match = /^(\d+):([0-9a-fA-F]{1,16})$/.exec(passed ?? "")
  if (match === null || Number(match[1]) !== process.pid) return new Set()
  const mask = BigInt(`0x${match[2]}`)
  const ignored = new Set<number>()
  for (let n = 1; n <= 64; n++) if ((mask >> BigInt(n - 1)) & 1n) ignored.add(n)
  return ignored
}

export type TerminationSignal = "SIGINT" | "SIGTERM" | "SIGHUP"

/** What ends corral's long-running commands (mcp, top): each stops what it holds first. */
export const terminationSignals: ReadonlyArray<TerminationSignal> = ["SIGINT", "SIGTERM", "SIGHUP"]

/**
 * While the scope is open, `signals` no longer kill corral, so its
 * finalizers (the group stop) always run. Each one received is queued, in order.
 */
export const queue = Effect.fn("Signals.queue")(function*(signals: ReadonlyArray<NodeJS.Signals>) {
  const received = yield* Queue.unbounded<NodeJS.Signals>()
  const onSignal = (signal: NodeJS.Signals) => void Queue.unsafeOffer(received, signal)
  yield* Effect.acquireRelease(
    Effect.sync(() => signals.forEach((signal) => process.on(signal, onSignal))),
    () => Effect.sync(() => signals.forEach((signal) => process.off(signal, onSignal)))
  )
  return received
})

/** As `queue`; the returned effect waits for the first signal received. */
export const listen = (signals: ReadonlyArray<NodeJS.Signals>) => Effect.map(queue(signals), Queue.take)

/**
 * Ends corral the way CMD ended, as timeout(1) does: dying of the same
 * signal, so a shell running corral sees what it would have seen of CMD
 * (bash stops a loop on a child's SIGINT, not on an exit 130). Where that
 * cannot be done (a signal that dumps core, or one with no default death),
 * exits 128+N. Call it last: the process ends here.
 */
export const dieOf = (signal: number): void => {
  process.exitCode = 128 + signal
  if (dumpsCore.has(signal)) return
  const name = byNumber.get(signal)
  if (name !== undefined && name !== "SIGKILL") {
    // a listener's removal puts back the default action, even over Node's own SIG_IGN of SIGPIPE
    const noop = () => {}
    process.on(name, noop)
    process.removeAllListeners(name)
  }
  process.kill(process.pid, toNode(signal))
}
