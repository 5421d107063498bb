/**
 * The body of a pattern worker (see `patternWorker.ts`): matches lines
 * against one regular expression at a time and answers with the result.
 * Everything here may run as long as a pattern makes it, so it runs in a
 * thread of its own that can be terminated.
 */
import { parentPort } from "node:worker_threads"
import type { Reply, Request } from "./patternWorker.js"

/** The last patterns used: `wait_for` asks again with every piece of new output. */
const compiled = new Map<string, RegExp>()

const regExpOf = (pattern: string): RegExp => {
  let regExp = compiled.get(pattern)
  if (regExp === undefined) {
    if (compiled.size >= 16) compiled.clear()
    regExp = new RegExp(pattern)
    compiled.set(pattern, regExp)
  }
  return regExp
}

/** The lines that match, each with its newline; a last line without one stays without. */
const keepMatching = (regExp: RegExp, text: string): string => {
  const lines = text.split("\n")
  const last = lines.pop()!
  const kept = lines.filter((line) => regExp.test(line)).map((line) => line + "\n")
  if (last !== "" && regExp.test(last)) kept.push(last)
  return kept.join("")
}

const answer = ({ op, pattern, text }: Request): Reply => {
  try {
    const regExp = regExpOf(pattern)
    return { value: op === "keep" ? keepMatching(regExp, text) : text.split("\n").some((line) => regExp.test(line)) }
  } catch (cause) {
    // a pattern that overflows the regexp stack throws instead of running long
    return { error: cause instanceof Error ? cause.message : String(cause) }
  }
}

parentPort?.on("message", (request: Request) => parentPort!.postMessage(answer(request)))
