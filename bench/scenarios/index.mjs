// Every scenario, in report order. Ids are stable: results are compared over time by id.
import { scenarios as output } from "./output.mjs"
import { scenarios as registry } from "./registry.mjs"
import { scenarios as start } from "./start.mjs"
import { scenarios as stop } from "./stop.mjs"

export const scenarios = [...stop, ...registry, ...output, ...start]
