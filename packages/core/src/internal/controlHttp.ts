/**
 * Requests to one supervisor's control socket. A failure is either no answer
 * (no socket, nobody listening, connection lost, an answer corral cannot
 * read) or a refusal the supervisor explained.
 */
import type { AgentOptions } from "node:http"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Api from "./controlApi.js"

export class NoAnswer extends Data.TaggedError("NoAnswer")<{ readonly socket: string; readonly reason: string }> {}

export class Refused extends Data.TaggedError("Refused")<{
  readonly socket: string
  readonly status: number
  readonly body: typeof Api.ErrorResponse.Type
}> {}

const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined

const reasonOf = (error: HttpClientError.HttpClientError | ParseResult.ParseError): string => {
  if (error._tag === "ParseError") return `its answer does not follow the ${Api.version} protocol: ${error.message}`
  switch (codeOf(error.cause)) {
    case "ENOENT":
      return "it has no control socket"
    case "ECONNREFUSED":
      return "nobody listens on its control socket"
    case "ECONNRESET":
      return "the connection was lost: the supervisor exited or closed it"
    default:
      return error.cause instanceof Error ? error.cause.message : error.message
  }
}

const noAnswer = (socket: string) => (error: HttpClientError.HttpClientError | ParseResult.ParseError) =>
  new NoAnswer({ socket, reason: reasonOf(error) })

/**
 * An HTTP client whose every connection goes to `socket`; closed with the
 * scope. Node passes an agent's options on to each connection it opens, so
 * `socketPath` works there although `AgentOptions` does not declare it.
 */
const clientFor = (socket: string) =>
  Effect.flatMap(NodeHttpClient.makeAgent({ socketPath: socket } as AgentOptions), (agent) =>
    Effect.provideService(NodeHttpClient.make, NodeHttpClient.HttpAgent, agent))

const send = (socket: string, method: "GET" | "POST", path: string, json?: unknown) =>
  Effect.gen(function*() {
    const client = yield* clientFor(socket)
    const request = HttpClientRequest.make(method)(`http://corral${path}`)
    const response = yield* client.execute(json === undefined ? request : HttpClientRequest.bodyUnsafeJson(request, json)).pipe(
      Effect.mapError(noAnswer(socket))
    )
    if (response.status === 200) return response
    const body = yield* HttpClientResponse.schemaBodyJson(Api.ErrorResponse)(response).pipe(
      Effect.mapError(noAnswer(socket))
    )
    return yield* new Refused({ socket, status: response.status, body })
  })

/** One request (with a JSON `body` if given) and its JSON answer; no answer within `timeout` counts as none. */
export const ask = <A, I>(
  socket: string,
  method: "GET" | "POST",
  path: string,
  schema: Schema.Schema<A, I>,
  timeout?: Duration.DurationInput,
  json?: unknown
): Effect.Effect<A, NoAnswer | Refused> => {
  const answer = Effect.scoped(Effect.flatMap(
    send(socket, method, path, json),
    (response) => Effect.mapError(HttpClientResponse.schemaBodyJson(schema)(response), noAnswer(socket))
  ))
  if (timeout === undefined) return answer
  return Effect.timeoutFail(answer, {
    duration: timeout,
    onTimeout: () => new NoAnswer({ socket, reason: "it did not answer in time (busy, or stopped with SIGSTOP)" })
  })
}

/** A streamed answer, as bytes; the stream fails when the connection is lost before its end. */
export const stream = (socket: string, path: string): Stream.Stream<Uint8Array, NoAnswer | Refused> =>
  Stream.unwrapScoped(Effect.map(
    send(socket, "GET", path),
    (response) => Stream.mapError(response.stream, noAnswer(socket))
  ))
