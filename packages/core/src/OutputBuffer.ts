/**
 * A byte-capped ring of output chunks. The oldest bytes are dropped (and
 * counted) when the cap is reached; a cut never splits a UTF-8 character.
 * Positions are absolute byte offsets since the shell started, so a reader's
 * cursor stays valid however much was dropped in between.
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { cutBefore, Ring } from "./internal/outputRing.js"

export type StreamName = "stdout" | "stderr"

export interface OutputChunk {
  readonly stream: StreamName
  /** Absolute offset of the chunk's first byte. */
  readonly offset: number
  readonly bytes: Uint8Array
}

export interface OutputRead {
  readonly text: string
  /** Cursor for the next read. */
  readonly cursor: number
  /** Bytes that were dropped before this reader saw them. */
  readonly dropped: number
}

/** One object with its methods: call them on it (`buffer.append(...)`), not detached. */
export interface OutputBuffer {
  readonly capacity: number
  /** Appends synchronously; called from the pipe's data handler. */
  append(stream: StreamName, bytes: Uint8Array): void
  /** Everything retained after `cursor`. */
  readSince(cursor: number): Effect.Effect<OutputRead>
  /** The last `n` retained lines. */
  tail(n: number): Effect.Effect<OutputRead>
  /** The retained chunks, each tagged with its stream. */
  readonly chunks: Effect.Effect<ReadonlyArray<OutputChunk>>
  /** Total bytes ever appended, and bytes dropped so far. */
  readonly stats: Effect.Effect<{ readonly written: number; readonly dropped: number }>
  /** New chunks as they arrive, every one however far the reader falls behind. Ends when `end` is called. */
  readonly live: Effect.Effect<Stream.Stream<OutputChunk>, never, Scope.Scope>
  /**
   * Every byte from the absolute offset `from` on (at the earliest, the
   * oldest retained one): `retained`, then `live`, without a gap or a
   * duplicate between the two. `live` is subscribed before `retained` is
   * read, so nothing appended meanwhile is missed, and it holds every new
   * chunk however far the reader falls behind (unlike `follow`).
   */
  subscribeFrom(from: number): Effect.Effect<Subscription, never, Scope.Scope>
  /**
   * The output from the absolute offset `from` (at the earliest, the oldest
   * retained byte), then new output until `end`. Read from the ring as the
   * reader pulls, at most `followBatchBytes` at a time: the reader holds no
   * bytes of its own, so one that stalls costs nothing. One that falls more
   * than `capacity` behind skips what was dropped meanwhile: the next chunk's
   * offset jumps by that much.
   */
  follow(from: number): Stream.Stream<OutputChunk>
  /** Marks the output as complete: live streams end. */
  readonly end: Effect.Effect<void>
  /** `end` for a callback outside any fiber (the end of a group's pipes). */
  unsafeEnd(): void
}

export interface Subscription {
  readonly retained: ReadonlyArray<OutputChunk>
  readonly live: Stream.Stream<OutputChunk>
}

/** What one pull of `follow` gives at most (more only when a single chunk is bigger). */
export const followBatchBytes = 64 * 1024

/**
 * The buffer: a class, one object per shell with its methods on the
 * prototype, where closures made per buffer held 1.7 KiB of every idle
 * shell's heap. Live subscribers share a PubSub made on the first one (an
 * idle shell's buffer holds none), published to only while someone
 * listens and ended with `null`. Followers read the ring as they pull, and
 * wait for the next append or the end when they have read it all: each
 * waiter is woken once.
 */
class BufferImpl implements OutputBuffer {
  private readonly ring: Ring
  private hub: PubSub.PubSub<OutputChunk | null> | undefined
  private subscribers = 0
  private waiting: Set<Deferred.Deferred<void>> | undefined

  constructor(readonly capacity: number) {
    this.ring = new Ring(capacity)
  }

  append(stream: StreamName, bytes: Uint8Array) {
    const chunk = this.ring.append(stream, bytes)
    if (chunk === undefined) return
    if (this.subscribers > 0) this.hub?.unsafeOffer(chunk)
    this.wake()
  }

  readSince(cursor: number) {
    return Effect.sync(() => this.ring.readSince(cursor))
  }

  tail(n: number) {
    return Effect.sync((): OutputRead => ({ ...this.ring.readSince(this.ring.lineStart(n)), dropped: 0 }))
  }

  get chunks() {
    return Effect.sync(() => this.ring.retained())
  }

  get stats() {
    return Effect.sync(() => ({ written: this.ring.end, dropped: this.ring.start }))
  }

  get live(): Effect.Effect<Stream.Stream<OutputChunk>, never, Scope.Scope> {
    return Effect.suspend(() =>
      this.ring.ended
        ? Effect.succeed(Stream.empty)
        : Effect.suspend(() => (this.hub === undefined ? PubSub.unbounded<OutputChunk | null>() : Effect.succeed(this.hub))).pipe(
          Effect.flatMap((made) => PubSub.subscribe(this.hub ??= made)),
          Effect.tap(Effect.acquireRelease(Effect.sync(() => this.subscribers++), () => Effect.sync(() => this.subscribers--))),
          Effect.map((queue) => Stream.fromQueue(queue).pipe(Stream.takeWhile((c): c is OutputChunk => c !== null)))
        )
    )
  }

  subscribeFrom(from: number) {
    return Effect.map(this.live, (stream): Subscription => {
      // subscribed first: what both hold is told apart by offset
      const retained = this.ring.chunksFrom(Math.max(from, this.ring.start))
      const last = retained.at(-1)
      const next = last === undefined ? Math.max(from, this.ring.start) : last.offset + last.bytes.length
      return { retained, live: Stream.filterMap(stream, (chunk) => Option.fromNullable(cutBefore(chunk, next))) }
    })
  }

  follow(from: number): Stream.Stream<OutputChunk> {
    return Stream.unfoldChunkEffect(from, (cursor) => this.pull(cursor))
  }

  /**
   * The next batch from `cursor`, waiting for an append when there is none
   * yet; none once the output has ended. Looking and starting to wait are
   * one synchronous step, so no append falls in between.
   */
  private pull(cursor: number): Effect.Effect<Option.Option<readonly [Chunk.Chunk<OutputChunk>, number]>> {
    return Effect.suspend(() => {
      const ring = this.ring
      const batch = ring.chunksFrom(Math.max(cursor, ring.start), followBatchBytes)
      const last = batch.at(-1)
      if (last !== undefined) return Effect.succeedSome([Chunk.unsafeFromArray(batch), last.offset + last.bytes.length] as const)
      if (ring.ended) return Effect.succeedNone
      const waiter = Deferred.unsafeMake<void>(FiberId.none)
      const waiting = this.waiting ??= new Set()
      waiting.add(waiter)
      return Deferred.await(waiter).pipe(
        Effect.onInterrupt(() => Effect.sync(() => waiting.delete(waiter))),
        Effect.zipRight(this.pull(cursor))
      )
    })
  }

  private wake() {
    const waiting = this.waiting
    if (waiting === undefined || waiting.size === 0) return
    for (const waiter of waiting) Deferred.unsafeDone(waiter, Exit.void)
    waiting.clear()
  }

  get end() {
    return Effect.sync(() => this.unsafeEnd())
  }

  unsafeEnd() {
    if (this.ring.ended) return
    this.ring.ended = true
    this.hub?.unsafeOffer(null)
    this.wake()
  }
}

export const make = (capacity: number): Effect.Effect<OutputBuffer> => Effect.sync(() => unsafeMake(capacity))

/** `make`, for a caller that makes it in a synchronous step of its own (a spawn's sinks). */
export const unsafeMake = (capacity: number): OutputBuffer => new BufferImpl(capacity)
