/**
 * The retained bytes of an `OutputBuffer`: a byte-capped ring of chunks by
 * absolute offset, that drops the oldest (never splitting a UTF-8
 * character) and finds where a read or the last lines begin. Synchronous;
 * the buffer adds the readers that wait for more.
 */
import type { OutputChunk, OutputRead, StreamName } from "../OutputBuffer.js"

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
export const cutBefore = (chunk: OutputChunk, from: number): OutputChunk | undefined =>
  chunk.offset >= from
    ? chunk
    : chunk.offset + chunk.bytes.length <= from
    ? undefined
    : { ...chunk, offset: from, bytes: chunk.bytes.subarray(from - chunk.offset) }

// a class, not a closure per operation: an idle shell holds one of these
export class Ring {
  private readonly chunks: Array<OutputChunk> = []
  /** Index of the oldest retained chunk in `chunks`. */
  private head = 0
  /** Absolute offset of the oldest retained byte. */
  start = 0
  /** Absolute offset after the newest byte. */
  end = 0
  ended = false

  constructor(readonly capacity: number) {}

  /** Appends `bytes`, dropping the oldest past the cap; the chunk as kept, or undefined once ended or for nothing. */
  append(stream: StreamName, bytes: Uint8Array): OutputChunk | undefined {
    if (bytes.length === 0 || this.ended) return undefined
    const chunk = { stream, offset: this.end, bytes }
    this.chunks.push(chunk)
    this.end += bytes.length
    if (this.end - this.start > this.capacity) this.dropTo(this.end - this.capacity)
    return chunk
  }

  private dropTo(target: number) {
    const ring = this.chunks
    while (this.head < ring.length && ring[this.head]!.offset + ring[this.head]!.bytes.length <= target) this.head++
    // a character may straddle chunks: skip its continuation bytes (at most 3) in whichever chunks hold them
    let skipped = 0
    for (let first = ring[this.head]; first !== undefined; first = ring[this.head]) {
      let cut = Math.max(0, target - first.offset)
      while (cut < first.bytes.length && skipped < 3 && isContinuation(first.bytes[cut]!)) cut++, skipped++
      if (cut < first.bytes.length) {
        if (cut > 0) ring[this.head] = { ...first, offset: first.offset + cut, bytes: first.bytes.subarray(cut) }
        break
      }
      this.head++
    }
    this.start = ring[this.head]?.offset ?? this.end
    // compact once dropped chunks are half the ring: amortized O(1), and a
    // flood never holds more than the cap again in chunks nobody can read
    if (this.head * 2 > ring.length) ring.splice(0, this.head), (this.head = 0)
  }

  /** Index in the ring of the chunk holding the absolute offset `at` (chunks are in offset order). */
  private indexOf(at: number) {
    let lo = this.head
    let hi = this.chunks.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.chunks[mid]!.offset + this.chunks[mid]!.bytes.length <= at) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Retained chunks from `from` on, up to about `maxBytes`. */
  chunksFrom(from: number, maxBytes = Infinity): Array<OutputChunk> {
    const batch: Array<OutputChunk> = []
    let bytes = 0
    for (let i = this.indexOf(from); i < this.chunks.length && bytes < maxBytes; i++) {
      const c = cutBefore(this.chunks[i]!, from)!
      batch.push(c)
      bytes += c.bytes.length
    }
    return batch
  }

  retained(): Array<OutputChunk> {
    return this.chunks.slice(this.head)
  }

  /** Everything retained after `cursor`, holding back a character still being written unless the output ended. */
  readSince(cursor: number): OutputRead {
    const from = Math.max(cursor, this.start)
    const chunks = this.chunksFrom(from)
    // a view of the newest chunk, not a copy, when the read lies in it (a short tail)
    const bytes = chunks.length === 1 ? chunks[0]!.bytes : Buffer.concat(chunks.map((c) => c.bytes))
    const length = this.ended ? bytes.length : completeLength(bytes)
    return {
      text: Buffer.from(bytes.buffer, bytes.byteOffset, length).toString("utf8"),
      cursor: from + length,
      dropped: Math.max(0, this.start - cursor)
    }
  }

  /** Where the last `n` lines begin; a final newline ends a line rather than starting one. */
  lineStart(n: number): number {
    let newlines = 0
    for (let i = this.chunks.length - 1; i >= this.head; i--) {
      const { bytes, offset } = this.chunks[i]!
      for (let j = bytes.lastIndexOf(0x0a); j >= 0; j = j > 0 ? bytes.lastIndexOf(0x0a, j - 1) : -1) {
        if (offset + j !== this.end - 1 && ++newlines === n) return offset + j + 1
      }
    }
    return this.start
  }
}
