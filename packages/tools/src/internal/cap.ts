/**
 * Keeps the beginning and the end of a text that may not fit in a tool
 * result: the first lines say what a command set out to do, the last ones
 * how it ended. Fed piece by piece, it never holds much more than the cap.
 */

/** Characters a tool result carries at most (plus the marker). */
export const MAX_CHARS = 30_000

export interface Capped {
  readonly text: string
  /** Characters left out of `text`. */
  readonly cut: number
  readonly total: number
}

export interface Keeper {
  readonly push: (text: string) => void
  /** `hint` ends the marker that replaces the cut part: what to do to see it. */
  readonly result: (hint: string) => Capped
}

export const makeKeeper = (max: number = MAX_CHARS): Keeper => {
  const headMax = Math.floor(max / 2)
  const tailMax = max - headMax
  let head = ""
  let tail = ""
  let total = 0
  return {
    push: (text) => {
      total += text.length
      const room = headMax - head.length
      if (room > 0) {
        head += text.slice(0, room)
        text = text.slice(room)
      }
      tail += text
      if (tail.length > 2 * tailMax) tail = tail.slice(-tailMax)
    },
    result: (hint) => {
      if (total <= max) return { text: head + tail, cut: 0, total }
      const cut = total - head.length - tailMax
      const marker = `\n[... ${cut} characters cut from the middle of ${total}: ${hint} ...]\n`
      return { text: head + marker + tail.slice(-tailMax), cut, total }
    }
  }
}

export const cap = (text: string, hint: string, max: number = MAX_CHARS): Capped => {
  const keeper = makeKeeper(max)
  keeper.push(text)
  return keeper.result(hint)
}
