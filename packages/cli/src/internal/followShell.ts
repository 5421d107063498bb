/**
 * A shell's output, retained then live, written to stdout as it comes
 * (`corral logs -f`, `corral attach`). Each chunk is written before the next
 * is read, so a slow reader slows the supervisor's stream; once the reader is
 * gone (`corral logs -f | head`) there is no point in following any longer.
 */
import { ControlClient } from "./controlClient.js"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Stream from "effect/Stream"
import { write } from "./stdio.js"

export const followShell = (id: string) =>
  Effect.flatMap(ControlClient, (client) =>
    client.follow(id).pipe(
      Stream.mapEffect(write),
      Stream.takeWhile(identity),
      Stream.runDrain
    ))
