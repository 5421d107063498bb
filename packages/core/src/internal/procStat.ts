import type { ProcessInfo } from "../ProcessTable.js"

/**
 * Parses one `/proc/<pid>/stat` line. The command name (field 2) may hold
 * spaces and parentheses, so fields are counted from the last `)`.
 */
export const parseStat = (line: string): ProcessInfo | undefined => {
  const open = line.indexOf("(")
  const close = line.lastIndexOf(")")
  if (open < 0 || close < open) return undefined
  const rest = fieldsAfterComm(line)
  // rest[0] is field 3 (state); field N is rest[N - 3]
  if (rest.length < 20) return undefined
  return {
    pid: Number(line.slice(0, open - 1)),
    comm: line.slice(open + 1, close),
    state: rest[0]!,
    ppid: Number(rest[1]),
    pgid: Number(rest[2]),
    sid: Number(rest[3]),
    threads: Number(rest[17]),
    startTime: Number(rest[19])
  }
}

/** The fields of a stat line after the command name: field N (from 3, the state) is at N - 3. */
export const fieldsAfterComm = (line: string): Array<string> => line.slice(line.lastIndexOf(")") + 2).split(" ")

/** A pid is gone only when it is a zombie or dead and no other thread runs. */
export const isGone = (p: ProcessInfo): boolean => (p.state === "Z" || p.state === "X") && p.threads <= 1
