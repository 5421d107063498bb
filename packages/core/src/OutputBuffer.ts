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
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

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

export interface OutputBuffer {
  readonly capacity: number
  /** Appends synchronously; called from the pipe's data handler. */
  readonly append: (stream: StreamName, bytes: Uint8Array) => void
  /** Everything retained after `cursor`. */
  readonly readSince: (cursor: number) => Effect.Effect<OutputRead>
  /** The last `n` retained lines. */
  readonly tail: (n: number) => Effect.Effect<OutputRead>
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
  readonly subscribeFrom: (from: number) => Effect.Effect<Subscription, never, Scope.Scope>
  /**
   * The output from the absolute offset `from` (at the earliest, the oldest
   * retained byte), then new output until `end`. Read from the ring as the
   * reader pulls, at most `followBatchBytes` at a time: the reader holds no
   * bytes of its own, so one that stalls costs nothing. One that falls more
   * than `capacity` behind skips what was dropped meanwhile: the next chunk's
   * offset jumps by that much.
   */
  readonly follow: (from: number) => Stream.Stream<OutputChunk>
  /** Marks the output as complete: live streams end. */
  readonly end: Effect.Effect<void>
  /** `end` for a callback outside any fiber (a pipe's `close` handler). */
  readonly unsafeEnd: () => void
}

export interface Subscription {
  readonly retained: ReadonlyArray<OutputChunk>
  readonly live: Stream.Stream<OutputChunk>
}

/** What one pull of `follow` gives at most (more only when a single chunk is bigger). */
export const followBatchBytes = 64 * 1024

const isContinuation = (b: number) => (b & 0xc0) === 0x80

/** Length of `bytes` without a trailing, still incomplete character. */
const completeLength = (bytes: Uint8Array) => {
  let i = bytes.length - 1
  while (i >= 0 && bytes.length - i <= 4 && isContinuation(bytes[i]!)) i--
  if (i < 0) return bytes.length
  const lead = bytes[i]!
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return bytes.length - i < need ? i : bytes.length
}

/** The part of `chunk` from the absolute offset `from` on; undefined when it all lies before. */
const cutBefore = (chunk: OutputChunk, from: number): OutputChunk | undefined =>
  chunk.offset >= from
    ? chunk
    : chunk.offset + chunk.bytes.length <= from
    ? undefined
    : { ...chunk, offset: from, bytes: chunk.bytes.subarray(from - chunk.offset) }

export const make = (capacity: number): Effect.Effect<OutputBuffer> =>
  Effect.sync(() => {
    const ring: Array<OutputChunk> = []
    let head = 0 // index of the oldest chunk in `ring`
    let start = 0 // absolute offset of the oldest retained byte
    let end = 0 // absolute offset after the newest byte
    let ended = false
    // made on the first subscriber or follower: an idle shell's buffer holds neither
    let hub: PubSub.PubSub<OutputChunk | null> | undefined
    let subscribers = 0 // publishing costs, so only when someone listens
    // followers waiting for more: each is woken once, by the next append or the end
    const waiting = new Set<Deferred.Deferred<void>>()
    const wakeAll = () => {
      for (const waiter of waiting) Deferred.unsafeDone(waiter, Exit.void)
      waiting.clear()
    }

    const dropTo = (target: number) => {
      while (head < ring.length && ring[head]!.offset + ring[head]!.bytes.length <= target) head++
      // a character may straddle chunks: skip its continuation bytes (at most 3) in whichever chunks hold them
      let skipped = 0
      for (let first = ring[head]; first !== undefined; first = ring[head]) {
        let cut = Math.max(0, target - first.offset)
        while (cut < first.bytes.length && skipped < 3 && isContinuation(first.bytes[cut]!)) cut++, skipped++
        if (cut < first.bytes.length) {
          if (cut > 0) ring[head] = { ...first, offset: first.offset + cut, bytes: first.bytes.subarray(cut) }
          break
        }
        head++
      }
      start = ring[head]?.offset ?? end
      // compact once dropped chunks are half the ring: amortized O(1), and a
      // flood never holds more than the cap again in chunks nobody can read
      if (head * 2 > ring.length) ring.splice(0, head), (head = 0)
    }

    const append = (stream: StreamName, bytes: Uint8Array) => {
      if (bytes.length === 0 || ended) return
      const chunk = { stream, offset: end, bytes }
      ring.push(chunk)
      end += bytes.length
      if (end - start > capacity) dropTo(end - capacity)
      if (subscribers > 0) hub?.unsafeOffer(chunk)
      if (waiting.size > 0) wakeAll()
    }

    /** Index in `ring` of the chunk holding the absolute offset `at` (chunks are in offset order). */
    const indexOf = (at: number) => {
      let lo = head
      let hi = ring.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (ring[mid]!.offset + ring[mid]!.bytes.length <= at) lo = mid + 1
        else hi = mid
      }
      return lo
    }

    /** Retained chunks from `from` on, up to about `maxBytes`. */
    const chunksFrom = (from: number, maxBytes = Infinity): Array<OutputChunk> => {
      const batch: Array<OutputChunk> = []
      let bytes = 0
      for (let i = indexOf(from); i < ring.length && bytes < maxBytes; i++) {
        const c = cutBefore(ring[i]!, from)!
        batch.push(c)
        bytes += c.bytes.length
      }
      return batch
    }

    /**
     * The next batch from `cursor`, waiting for an append when there is none
     * yet; none once the output has ended. Looking and starting to wait are
     * one synchronous step, so no append falls in between.
     */
    const pull = (cursor: number): Effect.Effect<Option.Option<readonly [Chunk.Chunk<OutputChunk>, number]>> =>
      Effect.suspend(() => {
        const batch = chunksFrom(Math.max(cursor, start), followBatchBytes)
        const last = batch.at(-1)
        if (last !== undefined) return Effect.succeedSome([Chunk.unsafeFromArray(batch), last.offset + last.bytes.length] as const)
        if (ended) return Effect.succeedNone
        const waiter = Deferred.unsafeMake<void>(FiberId.none)
        waiting.add(waiter)
        return Deferred.await(waiter).pipe(
          Effect.onInterrupt(() => Effect.sync(() => waiting.delete(waiter))),
          Effect.zipRight(pull(cursor))
        )
      })

    const follow = (from: number): Stream.Stream<OutputChunk> => Stream.unfoldChunkEffect(from, pull)

    const subscribe = Effect.suspend(() =>
      ended
        ? Effect.succeed(Stream.empty)
        : Effect.suspend(() => (hub === undefined ? PubSub.unbounded<OutputChunk | null>() : Effect.succeed(hub))).pipe(
          Effect.flatMap((made) => PubSub.subscribe(hub ??= made)),
          Effect.tap(Effect.acquireRelease(Effect.sync(() => subscribers++), () => Effect.sync(() => subscribers--))),
          Effect.map((queue) => Stream.fromQueue(queue).pipe(Stream.takeWhile((c): c is OutputChunk => c !== null)))
        )
    )

    const subscribeFrom = (from: number) =>
      Effect.map(subscribe, (live): Subscription => {
        // subscribed first: what both hold is told apart by offset
        const retained = chunksFrom(Math.max(from, start))
        const last = retained.at(-1)
        const next = last === undefined ? Math.max(from, start) : last.offset + last.bytes.length
        return { retained, live: Stream.filterMap(live, (chunk) => Option.fromNullable(cutBefore(chunk, next))) }
      })

    /** The retained bytes from `from` on; a view of the newest chunk, not a copy, when they all lie in it (a short tail). */
    const bytesFrom = (from: number): Uint8Array => {
      const chunks = chunksFrom(from)
      return chunks.length === 1 ? chunks[0]!.bytes : Buffer.concat(chunks.map((c) => c.bytes))
    }

    const readSince = (cursor: number) =>
      Effect.sync((): OutputRead => {
        const from = Math.max(cursor, start)
        const bytes = bytesFrom(from)
        // hold back a character still being written, unless the output ended
        const length = ended ? bytes.length : completeLength(bytes)
        return {
          text: Buffer.from(bytes.buffer, bytes.byteOffset, length).toString("utf8"),
          cursor: from + length,
          dropped: Math.max(0, start - cursor)
        }
      })

    /** Where the last `n` lines begin; a final newline ends a line rather than starting one. */
    const lineStart = (n: number) => {
      let newlines = 0
      for (let i = ring.length - 1; i >= head; i--) {
        const { bytes, offset } = ring[i]!
        for (let j = bytes.lastIndexOf(0x0a); j >= 0; j = j > 0 ? bytes.lastIndexOf(0x0a, j - 1) : -1) {
          if (offset + j !== end - 1 && ++newlines === n) return offset + j + 1
        }
      }
      return start
    }

    const tail = (n: number) => Effect.map(readSince(lineStart(n)), (read): OutputRead => ({ ...read, dropped: 0 }))

    const unsafeEnd = () => {
      if (ended) return
      ended = true
      hub?.unsafeOffer(null)
      wakeAll()
    }

    return {
      capacity,
      append,
      readSince,
      tail,
      chunks: Effect.sync(() => ring.slice(head)),
      stats: Effect.sync(() => ({ written: end, dropped: start })),
      live: subscribe,
      subscribeFrom,
      follow,
      end: Effect.sync(unsafeEnd),
      unsafeEnd
    }
  })
