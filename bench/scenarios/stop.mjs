// stop.*: ms from the stop call until the implementation returns, and whether
// the workload was really gone by then.
import { measureStop } from "../lib/measure.mjs"
import { peers, STOP_PEERS } from "../lib/peers.mjs"

const workloads = {
  obedient1: { argv: ["sleep", "1000"], processes: 1, text: "`sleep 1000`" },
  obedient50: {
    argv: ["sh", "-c", "for i in $(seq 50); do sleep 1000 & done; wait"],
    processes: 51,
    text: "`sh` that backgrounds 50 `sleep`s and waits"
  },
  stubborn: {
    argv: ["sh", "-c", "trap '' TERM; for i in $(seq 10); do sleep 1000 & done; wait"],
    processes: 11,
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
    text: "TERM-ignoring `sh` grown to 1000 `sleep`s, still forking"
  }
}

/** The default grace of corral (and of the opencode PR's reviewer's measurement). */
const DEFAULT_GRACE_MS = 3000

const stopScenario = ({ id, pid1, workload, grace, runs = { quick: 3, full: 7 }, quickSkip }) => ({
  id,
  suite: "stop",
  unit: "ms",
  better: "lower",
  pid1,
  grace,
  impls: STOP_PEERS,
  runs,
  quickSkip,
  workload: workloads[workload].text,
  run: async ({ impl, runs }) => {
    const peer = peers[impl]
    // one cheap stop first, so the measured runs do not pay for loading and JIT warm-up
    await measureStop(peer, { workload: workloads.obedient1, grace })
    const samples = []
    for (let i = 0; i < runs; i++) {
      const sample = await measureStop(peer, { workload: workloads[workload], grace })
      samples.push(sample)
      // a hang is a finding, not a figure: repeating it only costs time
      if (sample.timedOut) break
    }
    return { samples }
  }
})

export const scenarios = [
  stopScenario({ id: "stop.obedient.1.reaping", pid1: "reaping", workload: "obedient1", grace: DEFAULT_GRACE_MS }),
  stopScenario({ id: "stop.obedient.1.zombie-init", pid1: "zombie-init", workload: "obedient1", grace: DEFAULT_GRACE_MS }),
  stopScenario({ id: "stop.obedient.50.reaping", pid1: "reaping", workload: "obedient50", grace: DEFAULT_GRACE_MS }),
  stopScenario({ id: "stop.obedient.50.zombie-init", pid1: "zombie-init", workload: "obedient50", grace: DEFAULT_GRACE_MS }),
  stopScenario({ id: "stop.stubborn.grace200", pid1: "reaping", workload: "stubborn", grace: 200 }),
  stopScenario({
    id: "stop.forker.1000",
    pid1: "reaping",
    workload: "forker",
    grace: 200,
    runs: { quick: 3, full: 5 },
    quickSkip: { "tree-kill": "full run only: it spawns one `ps` per process, so its one run takes about 45 s" }
  })
]
