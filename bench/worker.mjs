// Runs one (scenario, implementation) batch. bench/run.mjs starts it inside a
// PID namespace of its own and reads the single result line it prints. A
// scenario that needs a fresh process per sample starts it again, in the same
// namespace, with `probe: true` (see runProbe).
import { RESULT_PREFIX } from "./lib/namespace.mjs"
import { disposeCorral } from "./lib/peers.mjs"
import { scenarios } from "./scenarios/index.mjs"

const main = async () => {
  const batch = JSON.parse(process.argv[2])
  const scenario = scenarios.find((s) => s.id === batch.id)
  if (scenario === undefined) throw new Error(`unknown scenario ${batch.id}`)
  const result = await scenario.run(batch)
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`)
  await disposeCorral()
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  // exit explicitly: a peer may leave a handle (a hung scope, a timer) that keeps Node alive
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error?.stack ?? String(error))
      process.exit(1)
    }
  )
}
