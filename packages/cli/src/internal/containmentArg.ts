/** `--containment`, shared by `corral run` and `corral mcp`. */
import type { Backend } from "@corral/core/Containment"
import { backends } from "@corral/core/Containment"
import * as Either from "effect/Either"
import { UsageError } from "./usageError.js"

export type Choice = Backend | "auto"

const choices: ReadonlyArray<string> = ["auto", ...backends]

export const parse = (value: string | undefined): Either.Either<Choice, UsageError> =>
  value !== undefined && choices.includes(value)
    ? Either.right(value as Choice)
    : Either.left(new UsageError({ message: `--containment must be one of ${choices.join(", ")}; got ${JSON.stringify(value ?? "")}` }))
