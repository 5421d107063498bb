import { cap, makeKeeper } from "../dist/internal/cap.js"
import { describe, expect, it } from "@effect/vitest"

describe("cap", () => {
  it("returns text within the cap untouched", () => {
    expect(cap("abc\n", "hint", 10)).toEqual({ text: "abc\n", cut: 0, total: 4 })
  })

  it("keeps the head and the tail, saying how much was cut and what to do", () => {
    expect(cap("0123456789abcdefghij", "read less", 10)).toEqual({
      text: "01234\n[... 10 characters cut from the middle of 20: read less ...]\nfghij",
      cut: 10,
      total: 20
    })
  })

  it("gives the same result fed piece by piece as at once", () => {
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i}\n`).join("")
    const keeper = makeKeeper(1000)
    for (let at = 0; at < text.length; at += 7) keeper.push(text.slice(at, at + 7))
    expect(keeper.result("hint")).toEqual(cap(text, "hint", 1000))
  })
})
