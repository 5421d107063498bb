/**
 * What `corral top` shows and how keys change it, without any terminal: the
 * latest table, the selected row (kept by id as rows come and go) and the
 * attached shell's output.
 */
import type { ShellEntry, Snapshot } from "./controlClient.js"
import * as Option from "effect/Option"

export interface Size {
  readonly columns: number
  readonly rows: number
}

export type View =
  | { readonly _tag: "Table" }
  | {
    readonly _tag: "Attached"
    readonly id: string
    /** The newest output, up to `keptChars`. */
    readonly text: string
    /** Why the output ended, once it has. */
    readonly ended: Option.Option<string>
  }

export interface State {
  /** None until the first listing arrives. */
  readonly snapshot: Option.Option<Snapshot>
  readonly now: number
  readonly selected: number
  readonly selectedId: string | undefined
  readonly view: View
  readonly size: Size
}

export type Event =
  | { readonly _tag: "Refreshed"; readonly snapshot: Snapshot; readonly now: number }
  /** A key by its readline name: up, down, j, k, return, escape, q ... */
  | { readonly _tag: "Key"; readonly name: string }
  | { readonly _tag: "Resized"; readonly size: Size }
  | { readonly _tag: "Output"; readonly id: string; readonly text: string }
  | { readonly _tag: "OutputEnded"; readonly id: string; readonly reason: string }
  /** Ctrl-C, or a termination signal. */
  | { readonly _tag: "Quit" }

export type Command =
  | { readonly _tag: "None" }
  | { readonly _tag: "Quit" }
  | { readonly _tag: "Attach"; readonly id: string }
  | { readonly _tag: "Detach" }

/** Enough output to fill any screen; older output is forgotten. */
export const keptChars = 64 * 1024

const none: Command = { _tag: "None" }

export const initial = (size: Size): State => ({
  snapshot: Option.none(),
  now: 0,
  selected: 0,
  selectedId: undefined,
  view: { _tag: "Table" },
  size
})

export const shellsOf = (state: State): ReadonlyArray<ShellEntry> =>
  Option.match(state.snapshot, { onNone: () => [], onSome: (s) => s.shells })

const select = (state: State, index: number): State => {
  const shells = shellsOf(state)
  const selected = Math.max(0, Math.min(index, shells.length - 1))
  return { ...state, selected, selectedId: shells[selected]?.id }
}

const refreshed = (state: State, snapshot: Snapshot, now: number): State => {
  const next = { ...state, snapshot: Option.some(snapshot), now }
  const index = snapshot.shells.findIndex((s) => s.id === state.selectedId)
  return select(next, index === -1 ? state.selected : index)
}

const onTableKey = (state: State, name: string): readonly [State, Command] => {
  switch (name) {
    case "up":
    case "k":
      return [select(state, state.selected - 1), none]
    case "down":
    case "j":
      return [select(state, state.selected + 1), none]
    case "return": {
      const id = shellsOf(state)[state.selected]?.id
      if (id === undefined) return [state, none]
      return [{ ...state, view: { _tag: "Attached", id, text: "", ended: Option.none() } }, { _tag: "Attach", id }]
    }
    case "q":
      return [state, { _tag: "Quit" }]
    default:
      return [state, none]
  }
}

const onAttachedKey = (state: State, name: string): readonly [State, Command] =>
  name === "escape" || name === "q" ? [{ ...state, view: { _tag: "Table" } }, { _tag: "Detach" }] : [state, none]

const appended = (text: string, more: string) => {
  const all = text + more
  return all.length > keptChars ? all.slice(all.length - keptChars) : all
}

export const update = (state: State, event: Event): readonly [State, Command] => {
  const view = state.view
  switch (event._tag) {
    case "Refreshed":
      return [refreshed(state, event.snapshot, event.now), none]
    case "Resized":
      return [{ ...state, size: event.size }, none]
    case "Quit":
      return [state, { _tag: "Quit" }]
    case "Key":
      return view._tag === "Table" ? onTableKey(state, event.name) : onAttachedKey(state, event.name)
    case "Output":
      if (view._tag !== "Attached" || view.id !== event.id) return [state, none]
      return [{ ...state, view: { ...view, text: appended(view.text, event.text) } }, none]
    case "OutputEnded":
      if (view._tag !== "Attached" || view.id !== event.id) return [state, none]
      return [{ ...state, view: { ...view, ended: Option.some(event.reason) } }, none]
  }
}
