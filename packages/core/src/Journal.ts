/**
 * The journal of live groups: one private file per supervisor, rewritten on
 * every change. When a supervisor and its watcher both die, the next registry
 * to start reads the files of dead supervisors and stops what they left,
 * only where pid, pgid and start time all still match.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StopReport, StopTarget } from "./GroupStop.js"
import * as GroupStop from "./GroupStop.js"
import { isGone, ProcessTable } from "./ProcessTable.js"
import * as StateDir from "./StateDir.js"

export interface JournalShell {
  /** The registry's id, `s1`. */
  readonly id: string
  /** `CORRAL_SHELL_ID` carried by every process of the shell: `<supervisor pid>:<id>`. */
  readonly tag: string
  /** Leader pid, which is also the group and session id. */
  readonly pid: number
  readonly leaderStartTime: number | null
  /** Process-table time at or before the group's birth. */
  readonly bornAfter: number
  /** The shell's cgroup, when it was held in one. */
  readonly cgroup?: string | undefined
  readonly command: string
  readonly cwd: string
  readonly owner: string
  readonly name?: string | undefined
  readonly startedAt: number
}

export interface Supervisor {
  readonly pid: number
  /** Set when another registry was already alive in the same process. */
  readonly instance?: number | undefined
  readonly startTime: number
  readonly name: string
  readonly startedAt: number
  readonly socket?: string | undefined
}

export interface JournalEntry {
  readonly version: 1
  readonly supervisor: Supervisor
  readonly shells: ReadonlyArray<JournalShell>
}

export const directory = (stateDir: string) => path.join(stateDir, "supervisors")

/** The pid, or `<pid>.<instance>` for a second registry in one process: names its journal and prefixes its tags. */
export const keyOf = (supervisor: Supervisor): string =>
  supervisor.instance === undefined || supervisor.instance <= 1 ? `${supervisor.pid}` : `${supervisor.pid}.${supervisor.instance}`

export const fileOf = (stateDir: string, key: number | string) => path.join(directory(stateDir), `${key}.json`)

/** Writes a supervisor's journal; `directory(stateDir)` must exist (`StateDir.ensure`). */
export const write = (stateDir: string, entry: JournalEntry): Effect.Effect<void> =>
  Effect.sync(() => StateDir.writePrivate(fileOf(stateDir, keyOf(entry.supervisor)), JSON.stringify(entry)))

/** Deletes a supervisor's journal, and the control socket it may have left. */
export const remove = (stateDir: string, key: number | string): Effect.Effect<void> =>
  Effect.sync(() => {
    fs.rmSync(fileOf(stateDir, key), { force: true })
    fs.rmSync(path.join(directory(stateDir), `${key}.sock`), { force: true })
  })

/** Every journal in the state directory; unreadable files are skipped. */
export const readAll = (stateDir: string): Effect.Effect<ReadonlyArray<JournalEntry>> =>
  Effect.sync(() => {
    const dir = directory(stateDir)
    if (!fs.existsSync(dir)) return []
    return fs.readdirSync(dir).flatMap((name) => {
      if (!name.endsWith(".json")) return []
      try {
        const entry = JSON.parse(fs.readFileSync(path.join(dir, name), "utf8")) as JournalEntry
        return entry.version === 1 ? [entry] : []
      } catch {
        return []
      }
    })
  })

/** Whether the journal's supervisor is the same live process (pid and start time). */
export const isAlive = (supervisor: Supervisor) =>
  Effect.flatMap(ProcessTable, (table) => table.lookup(supervisor.pid)).pipe(
    Effect.map(Option.exists((p) => p.startTime === supervisor.startTime && !isGone(p)))
  )

export const targetOf = (shell: JournalShell): StopTarget => ({
  pgid: shell.pid,
  sid: shell.pid,
  startTime: shell.bornAfter,
  shellId: shell.tag,
  cgroup: shell.cgroup
})

/**
 * Whether the shell's group is still the one the journal recorded: its
 * leader alive with the same pid, pgid and start time, or, once the leader
 * has exited, a member of its group carrying its tag and born after it.
 */
export const verify = (shell: JournalShell) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const leader = yield* table.lookup(shell.pid)
    if (Option.isSome(leader) && !isGone(leader.value)) {
      return leader.value.pgid === shell.pid && leader.value.startTime === shell.leaderStartTime
    }
    for (const p of yield* table.scan) {
      if (isGone(p) || p.pgid !== shell.pid || p.startTime < shell.bornAfter) continue
      if ((yield* table.shellIdsOf(p.pid)).includes(shell.tag)) return true
    }
    return false
  })

export interface Reaped {
  readonly supervisor: Supervisor
  readonly shell: JournalShell
  readonly report: StopReport
}

/** Stops what dead supervisors left running, and deletes their journals. */
export const reapDead = Effect.fn("Journal.reapDead")(function*(stateDir: string) {
  const reaped: Array<Reaped> = []
  for (const entry of yield* readAll(stateDir)) {
    if (yield* isAlive(entry.supervisor)) continue
    const verified = yield* Effect.filter(entry.shells, verify)
    const reports = verified.length === 0 ? [] : yield* GroupStop.stopGroups(verified.map(targetOf))
    for (const [i, shell] of verified.entries()) {
      reaped.push({ supervisor: entry.supervisor, shell, report: reports[i]! })
      yield* Effect.logWarning(
        `reaped shell ${shell.tag} (${shell.command}) left by dead supervisor ${entry.supervisor.name} ` +
          `(pid ${entry.supervisor.pid}): ${reports[i]!.members} processes stopped`
      )
    }
    yield* remove(stateDir, keyOf(entry.supervisor))
  }
  return reaped
})
