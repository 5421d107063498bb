/**
 * Requests to one supervisor's control socket, through the client that
 * `ControlApi` derives. A failure is either no answer (no socket, nobody
 * listening, connection lost, an answer corral cannot read) or a refusal the
 * supervisor explained.
 */
import type { AgentOptions } from "node:http"
import * as Api from "@corral/core/ControlApi"
import type { Input, TerminalSize } from "@corral/core/Shell"
import type { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

export class NoAnswer extends Data.TaggedError("NoAnswer")<{ readonly socket: string; readonly reason: string }> {}

const Refusal = Schema.Union(Api.InvalidShellId, Api.UnknownShell, Api.NoStdin, Api.NoTerminal)
const isRefusal = Schema.is(Refusal)

export class Refused extends Data.TaggedError("Refused")<{
  readonly socket: string
  readonly body: typeof Refusal.Type
}> {}

type Failure = HttpClientError.HttpClientError | ParseResult.ParseError | HttpApiDecodeError | typeof Refusal.Type

const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined

/**
 * A decode error's message, which describes the value refused, recursing
 * as deep as it nests: a socket planted in the state directory that
 * answered thousands of levels deep overflowed the stack of `corral ls`.
 */
const describe = (error: ParseResult.ParseError): string => {
  try {
    return error.message
  } catch (cause) {
    return `its values nest too deeply to describe (${cause instanceof Error ? cause.message : String(cause)})`
  }
}

const reasonOf = (error: HttpClientError.HttpClientError | ParseResult.ParseError | HttpApiDecodeError): string => {
  if (error._tag === "ParseError") return `its answer does not follow the ${Api.version} protocol: ${describe(error)}`
  if (error._tag === "HttpApiDecodeError") return `it does not understand this corral's request: ${error.message}`
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

const failureOf = (socket: string) => (error: Failure): NoAnswer | Refused =>
  isRefusal(error) ? new Refused({ socket, body: error }) : new NoAnswer({ socket, reason: reasonOf(error) })

/**
 * An HTTP client whose every connection goes to `socket`; closed with the
 * scope. Node passes an agent's options on to each connection it opens, so
 * `socketPath` works there although `AgentOptions` does not declare it.
 */
const httpClientFor = (socket: string) =>
  Effect.gen(function*() {
    const options: AgentOptions & { readonly socketPath: string } = { socketPath: socket }
    const agent = yield* NodeHttpClient.makeAgent(options)
    return yield* Effect.provideService(NodeHttpClient.make, NodeHttpClient.HttpAgent, agent)
  })

/**
 * The derived client of one route: a command asks one or two routes, and
 * deriving only those keeps the decoders of the others from being built
 * (half of `corral ls`'s client time).
 */
const route = <const Name extends "list" | "show" | "follow" | "stop" | "stdin" | "resize" | "stopAll">(name: Name, httpClient: HttpClient.HttpClient) =>
  HttpApiClient.endpoint(Api.ControlApi, { group: "shells", endpoint: name, httpClient, baseUrl: "http://corral" })

/** A request to a supervisor, given an HTTP client bound to its socket. */
export type Request<A> = (httpClient: HttpClient.HttpClient) => Effect.Effect<A, Failure>

export const list: Request<typeof Api.ListResponse.Type> = (httpClient) => Effect.flatMap(route("list", httpClient), (call) => call())

export const show = (id: string): Request<typeof Api.ShowResponse.Type> => (httpClient) =>
  Effect.flatMap(route("show", httpClient), (call) => call({ path: { id } }))

export const stop = (id: string): Request<typeof Api.Stopped.Type> => (httpClient) =>
  Effect.flatMap(route("stop", httpClient), (call) => call({ path: { id } }))

export const stdin = (id: string, input: Input): Request<typeof Api.StdinResponse.Type> => (httpClient) =>
  Effect.flatMap(route("stdin", httpClient), (call) => call({ path: { id }, payload: input }))

export const resize = (id: string, size: TerminalSize): Request<typeof Api.ResizeResponse.Type> => (httpClient) =>
  Effect.flatMap(route("resize", httpClient), (call) => call({ path: { id }, payload: size }))

export const stopAll: Request<typeof Api.StopAllResponse.Type> = (httpClient) =>
  Effect.flatMap(route("stopAll", httpClient), (call) => call())

/** One request and its decoded answer; no answer within `timeout` counts as none. */
export const ask = <A>(
  socket: string,
  request: Request<A>,
  timeout?: Duration.DurationInput
): Effect.Effect<A, NoAnswer | Refused> => {
  const answer = Effect.scoped(Effect.flatMap(httpClientFor(socket), request)).pipe(
    Effect.mapError(failureOf(socket))
  )
  if (timeout === undefined) return answer
  return Effect.timeoutFail(answer, {
    duration: timeout,
    onTimeout: () => new NoAnswer({ socket, reason: "it did not answer in time (busy, or stopped with SIGSTOP)" })
  })
}

/** The follow route's answer, as bytes; the stream fails when the connection is lost before its end. */
export const follow = (socket: string, id: string): Stream.Stream<Uint8Array, NoAnswer | Refused> =>
  Stream.unwrapScoped(Effect.map(
    Effect.flatMap(httpClientFor(socket), (httpClient) =>
      Effect.flatMap(route("follow", httpClient), (call) => call({ path: { id }, withResponse: true }))).pipe(
      Effect.mapError(failureOf(socket))
    ),
    ([, response]) => Stream.mapError(response.stream, failureOf(socket))
  ))
