// stop.*: ms from the stop call until the implementation returns, and whether
// the workload was really gone by then: every process left in the batch's
// namespace counts, not only the group's (see measureStop's `everywhere`).
//
// Every scenario runs twice for corral: under the default containment (auto:
// cgroup v2 where it works, as root) with the plain id, and under pidns and
// procScan with the id suffixed `@pidns` or `@procScan` (corral only: the peers have no backend).
import { measureStop } from "../lib/measure.mjs"
import { CORRAL_BACKENDS, corralWith, peers, STOP_PEERS } from "../lib/peers.mjs"
import { startIdle } from "../lib/proc.mjs"

const workloads = {
  obedient1: { argv: ["sleep", "1000"], processes: 1, sleeps: 1, text: "`sleep 1000`" },
  obedient50: {
    argv: ["sh", "-c", "for i in $(seq 50); do sleep 1000 & done; wait"],
    processes: 51,
    sleeps: 50,
    text: "`sh` that backgrounds 50 `sleep`s and waits"
  },
  stubborn: {
    argv: ["sh", "-c", "trap '' TERM; for i in $(seq 10); do sleep 1000 & done; wait"],
    processes: 11,
    sleeps: 10,
    text: "`sh` ignoring SIGTERM with 10 `sleep`s that inherit the ignore"
  },
  // grows to 1000 sleeps, then keeps forking a short sleep every 10 ms, so a
  // stop races live forks
  forker: {
    argv: [
      "sh",
      "-c",
      "trap '' TERM; n=0; while [ $n -lt 1000 ]; do sleep 1000 & n=$((n+1)); done; while :; do sleep 0.01; done"
    ],
    processes: 1001,
    sleeps: 1000,
    text: "TERM-ignoring `sh` grown to 1000 `sleep`s, still forking"
  },
  // one child leaves the group and the session and sheds the environment
  // (the marker, CORRAL_SHELL_ID) before the stop: only a namespace-wide
  // count sees it. Four processes: dash (/bin/sh here) does not exec the last
  // command of `sh -c`, so the escaped `sh` stays as the escaped `sleep`'s parent.
  escaper: {
    argv: ["sh", "-c", "setsid env -i sh -c 'sleep 1000' & sleep 1000 & wait"],
    processes: 4,
    sleeps: 2,
    text: "`sh` with a `sleep` and a `setsid env -i sh -c 'sleep 1000'` (new session, empty environment)"
  },
  // each hopper ignores TERM, forks its successor after 3 ms and exits, so
  // its pid keeps changing and its parent is always gone
  hopper: {
    argv: ["sh", "-c", "export HOP='trap \"\" TERM; sleep 0.003; sh -c \"$HOP\" & exit 0'; sh -c \"$HOP\"; sleep 1000"],
    processes: 3,
    sleeps: 1,
    text: "`sh` and its `sleep`, plus a TERM-ignoring pid hopper (each `sh` forks its successor after 3 ms and exits)"
  }
}

/** The default grace of corral (and of the opencode PR's reviewer's measurement). */
const DEFAULT_GRACE_MS = 3000

/** Idle processes outside the workload, in the same namespace, for the busy* scenarios. */
const BUSY = 1000

/** The scenario's measured runs: one unmeasured stop first, then `runs` stops, none after a hang. */
const measureRuns = async (peer, { workload, grace, runs, busy }) => {
  const idle = busy > 0 ? await startIdle(busy) : undefined
  const exempt = idle === undefined ? [] : [idle.pgid]
  try {
    // one cheap stop first, so the measured runs do not pay for loading and JIT warm-up
    await measureStop(peer, { workload: workloads.obedient1, grace, everywhere: true, exempt })
    const samples = []
    for (let i = 0; i < runs; i++) {
      const sample = await measureStop(peer, { workload: workloads[workload], grace, everywhere: true, exempt })
      samples.push(sample)
      // a hang is a finding, not a figure: repeating it only costs time
      if (sample.timedOut) break
    }
    return { samples }
  } finally {
    // the namespace's end kills them anyway; this keeps the batch's own exit quick
    await idle?.stop()
  }
}

const describe = (workload, busy) =>
  busy > 0
    ? `${workloads[workload].text}, with ${busy} idle \`sleep 1000\`s of another group and session alive in the namespace`
    : workloads[workload].text

/** The scenario for every implementation, then one per extra corral backend, corral only. */
const stopScenarios = ({ id, pid1, workload, grace, runs = { quick: 3, full: 7 }, quickSkip, busy = 0 }) => {
  const common = { suite: "stop", unit: "ms", better: "lower", pid1, grace, runs, workload: describe(workload, busy), extras: { containment: "distinct" } }
  return [
    {
      ...common,
      id,
      impls: STOP_PEERS,
      quickSkip,
      run: ({ impl, runs }) => measureRuns(peers[impl], { workload, grace, runs, busy })
    },
    ...CORRAL_BACKENDS.map((backend) => ({
      ...common,
      id: `${id}@${backend}`,
      base: id,
      backend,
      impls: ["corral"],
      run: ({ runs }) => measureRuns(corralWith(backend), { workload, grace, runs, busy })
    }))
  ]
}

export const scenarios = [
  stopScenarios({ id: "stop.obedient.1.reaping", pid1: "reaping", workload: "obedient1", grace: DEFAULT_GRACE_MS }),
  stopScenarios({ id: "stop.obedient.1.zombie-init", pid1: "zombie-init", workload: "obedient1", grace: DEFAULT_GRACE_MS }),
  stopScenarios({ id: "stop.obedient.1.busy1000", pid1: "reaping", workload: "obedient1", grace: DEFAULT_GRACE_MS, busy: BUSY }),
  stopScenarios({ id: "stop.obedient.50.reaping", pid1: "reaping", workload: "obedient50", grace: DEFAULT_GRACE_MS }),
  stopScenarios({ id: "stop.obedient.50.zombie-init", pid1: "zombie-init", workload: "obedient50", grace: DEFAULT_GRACE_MS }),
  stopScenarios({ id: "stop.obedient.50.busy1000", pid1: "reaping", workload: "obedient50", grace: DEFAULT_GRACE_MS, busy: BUSY }),
  stopScenarios({ id: "stop.stubborn.grace200", pid1: "reaping", workload: "stubborn", grace: 200 }),
  stopScenarios({
    id: "stop.forker.1000",
    pid1: "reaping",
    workload: "forker",
    grace: 200,
    runs: { quick: 3, full: 5 },
    quickSkip: { "tree-kill": "full run only: it spawns one `ps` per process, so its one run takes about 45 s" }
  }),
  stopScenarios({ id: "stop.escaper", pid1: "reaping", workload: "escaper", grace: DEFAULT_GRACE_MS }),
  stopScenarios({ id: "stop.hopper", pid1: "reaping", workload: "hopper", grace: 200 })
].flat()
