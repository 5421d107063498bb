import * as Data from "effect/Data"

/** A command line corral cannot act on; `message` names the bad part and the fix. */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}
