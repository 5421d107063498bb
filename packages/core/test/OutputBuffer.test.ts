import { OutputBuffer } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"

const bytes = (text: string) => new TextEncoder().encode(text)
const decode = (b: Uint8Array) => Buffer.from(b).toString("utf8")
const isContinuation = (byte: number) => (byte & 0xc0) === 0x80

/** Bytes retained: what was written minus what was dropped. */
const retained = (buffer: OutputBuffer.OutputBuffer) =>
  Effect.map(buffer.stats, ({ dropped, written }) => written - dropped)

describe("OutputBuffer capacity", () => {
  it.effect("drops the oldest bytes past the cap and counts them", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(10)
      buffer.append("stdout", bytes("0123456789"))
      expect(yield* buffer.stats).toEqual({ written: 10, dropped: 0 })
      buffer.append("stdout", bytes("abcde"))
      expect(yield* buffer.readSince(0)).toEqual({ text: "56789abcde", cursor: 15, dropped: 5 })
      expect(yield* buffer.stats).toEqual({ written: 15, dropped: 5 })
      buffer.append("stderr", bytes("ABCDEFGHIJKLMNOPQRST"))
      expect(yield* buffer.readSince(0)).toEqual({ text: "KLMNOPQRST", cursor: 35, dropped: 25 })
    }))

  it.effect("keeps a chunk larger than the cap only in part", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(4)
      buffer.append("stdout", bytes("abcdefgh"))
      expect((yield* buffer.readSince(0)).text).toBe("efgh")
      expect(yield* retained(buffer)).toBe(4)
    }))

  it.effect("stays consistent after dropping thousands of small chunks", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      for (let i = 0; i < 5_000; i++) buffer.append(i % 2 ? "stderr" : "stdout", bytes(`${String(i).padStart(4, "0")}\n`))
      const read = yield* buffer.readSince(0)
      expect(read).toEqual({
        text: Array.from({ length: 20 }, (_, i) => `${4980 + i}\n`).join(""),
        cursor: 25_000,
        dropped: 24_900
      })
      const chunks = yield* buffer.chunks
      expect(chunks).toHaveLength(20)
      expect(chunks[0]).toMatchObject({ stream: "stdout", offset: 24_900 })
    }))

  it.effect("ignores empty appends", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(4)
      buffer.append("stdout", new Uint8Array(0))
      expect(yield* buffer.chunks).toEqual([])
      expect(yield* buffer.stats).toEqual({ written: 0, dropped: 0 })
    }))
})

describe("OutputBuffer.readSince", () => {
  it.effect("returns only what is new since the cursor", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("ab"))
      const first = yield* buffer.readSince(0)
      expect(first).toEqual({ text: "ab", cursor: 2, dropped: 0 })
      expect(yield* buffer.readSince(first.cursor)).toEqual({ text: "", cursor: 2, dropped: 0 })
      buffer.append("stderr", bytes("cd"))
      buffer.append("stdout", bytes("ef"))
      expect(yield* buffer.readSince(first.cursor)).toEqual({ text: "cdef", cursor: 6, dropped: 0 })
    }))

  it.effect("reports how many bytes were dropped before the reader saw them", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(8)
      buffer.append("stdout", bytes("abcd"))
      const first = yield* buffer.readSince(0)
      buffer.append("stdout", bytes("efghijklmn"))
      // 14 bytes written, 8 kept: "ef" were dropped unread, "abcd" had been read
      expect(yield* buffer.readSince(first.cursor)).toEqual({ text: "ghijklmn", cursor: 14, dropped: 2 })
      expect(yield* buffer.readSince(14)).toEqual({ text: "", cursor: 14, dropped: 0 })
    }))
})

describe("OutputBuffer.tail", () => {
  it.effect("returns the last n lines", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("one\ntwo\n"))
      buffer.append("stderr", bytes("three\nfour\n"))
      expect((yield* buffer.tail(1)).text).toBe("four\n")
      expect((yield* buffer.tail(2)).text).toBe("three\nfour\n")
      expect((yield* buffer.tail(10)).text).toBe("one\ntwo\nthree\nfour\n")
      expect((yield* buffer.tail(2)).cursor).toBe(19)
    }))

  it.effect("counts an unterminated last line as a line", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("one\ntwo\nthree"))
      expect((yield* buffer.tail(1)).text).toBe("three")
      expect((yield* buffer.tail(2)).text).toBe("two\nthree")
    }))

  it.effect("counts a leading empty line as a line", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("\nlast\n"))
      expect((yield* buffer.tail(1)).text).toBe("last\n")
      expect((yield* buffer.tail(2)).text).toBe("\nlast\n")
    }))

  it.effect("reads only what is retained", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(7)
      buffer.append("stdout", bytes("aaaa\nbbbb\ncc\n"))
      expect((yield* buffer.tail(10)).text).toBe("bbb\ncc\n")
    }))
})

describe("OutputBuffer and UTF-8", () => {
  const alphabet = ["é", "😀", "a", "€", "\n"]
  const text = Array.from({ length: 400 }, (_, i) => alphabet[(i * 7 + (i >> 3)) % alphabet.length]).join("")
  const encoded = bytes(text)

  /** Feeds `encoded` in chunks of the given sizes, checking the buffer after every append. */
  const feed = (capacity: number, sizes: ReadonlyArray<number>) =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(capacity)
      let at = 0
      for (let i = 0; at < encoded.length; i++) {
        const size = sizes[i % sizes.length]!
        buffer.append("stdout", encoded.subarray(at, at + size))
        at += size
        const read = yield* buffer.readSince(0)
        expect(read.text).not.toContain("\uFFFD")
        expect(text).toContain(read.text)
        expect(yield* retained(buffer)).toBeLessThanOrEqual(capacity)
        const [oldest] = yield* buffer.chunks
        if (oldest !== undefined) expect(isContinuation(oldest.bytes[0]!), "retained output starts mid-character").toBe(false)
      }
      const last = yield* buffer.readSince(0)
      expect(text.endsWith(last.text)).toBe(true)
      // a cut moves forward at most three bytes to reach a character start
      expect(bytes(last.text).length).toBeGreaterThanOrEqual(capacity - 3)
      expect(last.text).toBe(decode(Buffer.concat((yield* buffer.chunks).map((c) => c.bytes))))
      expect(yield* buffer.tail(3)).not.toHaveProperty("text", expect.stringContaining("\uFFFD"))
    })

  it.effect("never splits a character when every chunk holds whole characters", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(9)
      for (const char of text) {
        buffer.append(char === "😀" ? "stderr" : "stdout", bytes(char))
        const read = yield* buffer.readSince(0)
        expect(read.text).not.toContain("\uFFFD")
        expect(yield* retained(buffer)).toBeLessThanOrEqual(9)
      }
    }))

  it.effect("moves a cut that lands on a chunk boundary inside a character to the next character", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(2)
      // "Aé" then "B", the pipe having split "é" (C3 A9) between two chunks
      buffer.append("stdout", Uint8Array.of(0x41, 0xc3))
      buffer.append("stdout", Uint8Array.of(0xa9, 0x42))
      expect(yield* buffer.readSince(0)).toEqual({ text: "B", cursor: 4, dropped: 3 })
    }))

  it.effect("never splits a character when chunks cut characters in two (as pipes do)", () =>
    Effect.gen(function*() {
      for (const capacity of [5, 7, 16, 33]) {
        for (const sizes of [[1], [3], [5], [1, 2, 3, 7], [13]]) yield* feed(capacity, sizes)
      }
    }))

  it.effect("holds back an incomplete trailing character until it is completed", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      const smile = bytes("😀")
      buffer.append("stdout", Uint8Array.of(0x61, smile[0]!, smile[1]!))
      expect(yield* buffer.readSince(0)).toEqual({ text: "a", cursor: 1, dropped: 0 })
      buffer.append("stdout", smile.subarray(2, 3))
      expect(yield* buffer.readSince(1)).toEqual({ text: "", cursor: 1, dropped: 0 })
      buffer.append("stdout", smile.subarray(3))
      expect(yield* buffer.readSince(1)).toEqual({ text: "😀", cursor: 5, dropped: 0 })
      buffer.append("stdout", bytes("é").subarray(0, 1))
      expect(yield* buffer.readSince(0)).toEqual({ text: "a😀", cursor: 5, dropped: 0 })
    }))
})

describe("OutputBuffer chunks and live", () => {
  it.effect("keeps each chunk's stream name and arrival order", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("out 1\n"))
      buffer.append("stderr", bytes("err 1\n"))
      buffer.append("stdout", bytes("out 2\n"))
      const chunks = yield* buffer.chunks
      expect(chunks.map((c) => [c.stream, c.offset, decode(c.bytes)])).toEqual([
        ["stdout", 0, "out 1\n"],
        ["stderr", 6, "err 1\n"],
        ["stdout", 12, "out 2\n"]
      ])
    }))

  it.effect("chunks start at the oldest retained byte after a drop", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(6)
      buffer.append("stdout", bytes("abcd"))
      buffer.append("stderr", bytes("efgh"))
      const chunks = yield* buffer.chunks
      expect(chunks.map((c) => [c.stream, c.offset, decode(c.bytes)])).toEqual([
        ["stdout", 2, "cd"],
        ["stderr", 4, "efgh"]
      ])
    }))

  it.scoped("live delivers chunks appended after subscribing and ends after `end`", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("before\n"))
      const live = yield* buffer.live
      const collected = yield* Effect.fork(Stream.runCollect(live))
      buffer.append("stdout", bytes("one\n"))
      buffer.append("stderr", bytes("two\n"))
      yield* buffer.end
      const chunks = Chunk.toReadonlyArray(yield* Fiber.join(collected))
      expect(chunks.map((c) => [c.stream, decode(c.bytes)])).toEqual([["stdout", "one\n"], ["stderr", "two\n"]])
    }))

  it.scoped("after `end`, live is empty and appends are ignored", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("kept\n"))
      yield* buffer.end
      yield* buffer.end
      buffer.append("stdout", bytes("late\n"))
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(yield* buffer.live))).toEqual([])
      expect((yield* buffer.readSince(0)).text).toBe("kept\n")
    }))
})

describe("OutputBuffer.follow", () => {
  const text = (chunks: ReadonlyArray<OutputBuffer.OutputChunk>) => chunks.map((c) => decode(c.bytes)).join("")
  const contiguous = (chunks: ReadonlyArray<OutputBuffer.OutputChunk>) =>
    chunks.every((c, i) => i === 0 || c.offset === chunks[i - 1]!.offset + chunks[i - 1]!.bytes.length)

  it.effect("gives the output from an offset, then what arrives, and ends after `end`", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("abc"))
      buffer.append("stderr", bytes("def"))
      const following = yield* Effect.fork(Stream.runCollect(buffer.follow(1)))
      yield* Effect.yieldNow()
      buffer.append("stdout", bytes("ghi"))
      yield* buffer.end
      const chunks = Chunk.toReadonlyArray(yield* Fiber.join(following))
      expect(text(chunks)).toBe("bcdefghi")
      expect(chunks[0]!.offset).toBe(1)
      expect(contiguous(chunks)).toBe(true)
      expect(chunks.map((c) => c.stream)).toEqual(["stdout", "stderr", "stdout"])
    }))

  it.effect("waits for new output while it has read everything", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      const pull = yield* Stream.toPull(buffer.follow(0))
      const waiting = yield* Effect.fork(pull)
      yield* Effect.yieldNow()
      expect(yield* Fiber.poll(waiting)).toEqual(Option.none())
      buffer.append("stdout", bytes("late"))
      expect(text(Chunk.toReadonlyArray(yield* Fiber.join(waiting)))).toBe("late")
    }).pipe(Effect.scoped))

  it.effect("a reader that stops pulling holds nothing: it skips what was dropped meanwhile, the offset says how much", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(10)
      buffer.append("stdout", bytes("aaaa"))
      const pull = yield* Stream.toPull(buffer.follow(0))
      expect(Chunk.toReadonlyArray(yield* pull).map((c) => [c.offset, decode(c.bytes)])).toEqual([[0, "aaaa"]])
      for (const letter of ["b", "c", "d"]) buffer.append("stdout", bytes(letter.repeat(10)))
      expect(Chunk.toReadonlyArray(yield* pull).map((c) => [c.offset, decode(c.bytes)])).toEqual([[24, "dddddddddd"]])
      yield* buffer.end
      expect(yield* Effect.flip(pull)).toEqual(Option.none())
    }).pipe(Effect.scoped))

  it.effect(`gives at most ${OutputBuffer.followBatchBytes} bytes a pull`, () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(1024 * 1024)
      for (let i = 0; i < 32; i++) buffer.append("stdout", new Uint8Array(8 * 1024).fill(0x61 + (i % 26)))
      yield* buffer.end
      const pulls = yield* Stream.runCollect(Stream.mapChunks(buffer.follow(0), (chunk) => Chunk.of(Chunk.toReadonlyArray(chunk))))
      const sizes = Chunk.toReadonlyArray(pulls).map((batch) => batch.reduce((n, c) => n + c.bytes.length, 0))
      expect(sizes).toEqual([65536, 65536, 65536, 65536])
      expect(contiguous(Chunk.toReadonlyArray(pulls).flat())).toBe(true)
    }))
})

describe("OutputBuffer.subscribeFrom", () => {
  const text = (chunks: ReadonlyArray<OutputBuffer.OutputChunk>) => chunks.map((c) => decode(c.bytes)).join("")
  const offsets = (chunks: ReadonlyArray<OutputBuffer.OutputChunk>) => chunks.map((c) => c.offset)

  it.scoped("gives what is retained from an offset inside a chunk, then every new chunk, without a gap or a duplicate", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("abc"))
      buffer.append("stderr", bytes("def"))
      const { live, retained } = yield* buffer.subscribeFrom(1)
      const collected = yield* Effect.fork(Stream.runCollect(live))
      buffer.append("stdout", bytes("ghi"))
      buffer.append("stdout", bytes("jk"))
      yield* buffer.end
      const after = Chunk.toReadonlyArray(yield* Fiber.join(collected))
      expect(text(retained)).toBe("bcdef")
      expect(offsets(retained)).toEqual([1, 3])
      expect(text(after)).toBe("ghijk")
      expect(offsets(after)).toEqual([6, 9])
    }))

  it.scoped("keeps every new chunk for a reader that has not pulled, past the capacity (unlike follow)", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(4)
      buffer.append("stdout", bytes("abcdefgh"))
      const { live, retained } = yield* buffer.subscribeFrom(0)
      for (const letter of ["x", "y", "z"]) buffer.append("stdout", bytes(letter.repeat(4)))
      yield* buffer.end
      // what was dropped before the subscription is gone: the first retained offset says how much
      expect(offsets(retained)).toEqual([4])
      expect(text(retained) + text(Chunk.toReadonlyArray(yield* Stream.runCollect(live)))).toBe("efghxxxxyyyyzzzz")
    }))

  it.scoped("after `end`, gives what is retained and an empty live stream", () =>
    Effect.gen(function*() {
      const buffer = yield* OutputBuffer.make(100)
      buffer.append("stdout", bytes("done\n"))
      yield* buffer.end
      const { live, retained } = yield* buffer.subscribeFrom(0)
      expect(text(retained)).toBe("done\n")
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(live))).toEqual([])
    }))
})
