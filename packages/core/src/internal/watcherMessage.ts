/**
 * What a supervisor tells its watcher, declared once: the limits it starts
 * it with (an argument) and one JSON line per message on its stdin.
 * `Watcher` writes values of their encoded types with `JSON.stringify` (they
 * have no transformation), so a supervisor that only runs commands does not
 * load `Schema`; the watcher reads each line's op and key with `JSON.parse`,
 * and decodes the targets with these schemas once a stop is due.
 */
import * as Schema from "effect/Schema"

/** Where the pid allocator stood: the pid last handed out in the namespace, and the host's forks since boot. */
export const PidMark = Schema.Struct({ lastPid: Schema.Number, forks: Schema.Number })

/** What identifies a shell corral started, and guards against PID reuse. Serializable: the watcher and journal carry it. */
export const StopTarget = Schema.Struct({
  pgid: Schema.Number,
  sid: Schema.Number,
  /** Process-table time at or before the group's birth; older processes are never members. */
  startTime: Schema.Number,
  /** `CORRAL_SHELL_ID` of the group, used to find processes that left the session. */
  shellId: Schema.optional(Schema.String),
  /** The shell's own cgroup (absolute path) when it is held in one: then membership is exact. */
  cgroup: Schema.optional(Schema.String),
  /** Set when the leader (`unshare`) holds the shell in a PID namespace of its own. */
  pidns: Schema.optional(Schema.Literal(true)),
  /** Set when the leader is corral's init, a child subreaper whose child is the command (procScan, ADR 58). */
  reaper: Schema.optional(Schema.Literal(true)),
  /** Where the pid allocator stood just before the spawn: a scan for members skips the pids not handed out since. */
  pidMark: Schema.optional(PidMark),
  /**
   * The leader's own start time, where membership is found by scanning: a
   * process of the leader's pid with another start time took that pid after
   * the leader was reaped, and its group and session ids with it.
   */
  leaderStartTime: Schema.optional(Schema.Number)
})

/** Targets are known by key: an add of the same key replaces what the watcher knew. */
export const WatcherMessage = Schema.Union(
  Schema.Struct({ op: Schema.Literal("add"), key: Schema.String, target: StopTarget }),
  Schema.Struct({ op: Schema.Literal("remove"), key: Schema.String })
)

/** The supervisor's stop policy, in milliseconds. */
export const WatcherLimits = Schema.Struct({ grace: Schema.Number, killTimeout: Schema.Number, killInterval: Schema.Number })

/** None when the argument is missing or malformed: the watcher then stops with the default limits. */
export const decodeLimits = Schema.decodeUnknownOption(Schema.parseJson(WatcherLimits))
