// Horizontal bar charts as plain SVG: one bar per implementation at its
// median, a whisker from min to max, and the figure (with any warning) at the
// end. A log scale is used when the values span more than a factor of 20.
const WIDTH = 720
const LABEL_WIDTH = 140
const VALUE_WIDTH = 230
const ROW_HEIGHT = 26
const TOP = 44
const BOTTOM = 30
const PLOT = WIDTH - LABEL_WIDTH - VALUE_WIDTH

const escape = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const makeScale = (values) => {
  const positive = values.filter((v) => v > 0)
  const lo = Math.min(...positive)
  const hi = Math.max(...positive)
  if (positive.length > 0 && hi / lo > 20) {
    const from = 10 ** Math.floor(Math.log10(lo))
    const to = 10 ** Math.ceil(Math.log10(hi))
    const ticks = []
    for (let t = from; t <= to * 1.0001; t *= 10) ticks.push(t)
    const x = (v) => (PLOT * Math.log10(Math.max(v, from) / from)) / Math.log10(to / from)
    return { x, ticks, log: true }
  }
  const top = Math.max(...values) > 0 ? Math.max(...values) : 1
  const step = niceStep(top / 4)
  const to = Math.ceil(top / step) * step
  const ticks = []
  for (let t = 0; t <= to + step / 2; t += step) ticks.push(t)
  // a negative figure (RSS that shrank) is drawn at zero
  return { x: (v) => (PLOT * Math.max(0, v)) / to, ticks, log: false }
}

const niceStep = (raw) => {
  const power = 10 ** Math.floor(Math.log10(raw))
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)
}

const tickLabel = (t) => (t >= 1000 ? `${+(t / 1000).toFixed(1)}k` : `${+t.toPrecision(3)}`)

/**
 * rows: [{ label, median, min, max, text, warn, highlight }]; rows without a
 * median are drawn as a label and their text only.
 */
export const barChart = ({ title, unit, rows }) => {
  const measured = rows.filter((r) => r.median !== undefined)
  const scale = makeScale(measured.flatMap((r) => [r.min, r.median, r.max]))
  const height = TOP + rows.length * ROW_HEIGHT + BOTTOM
  const plotBottom = TOP + rows.length * ROW_HEIGHT
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="8" y="20" font-size="14" font-weight="600">${escape(title)}</text>`,
    `<text x="8" y="36" fill="#555">${escape(unit)}${scale.log ? ", log scale" : ""}; bar = median, whisker = min to max</text>`
  ]
  for (const t of scale.ticks) {
    const x = LABEL_WIDTH + scale.x(t)
    out.push(`<line x1="${x}" y1="${TOP - 4}" x2="${x}" y2="${plotBottom}" stroke="#e3e3e3"/>`)
    out.push(`<text x="${x}" y="${plotBottom + 16}" text-anchor="middle" fill="#777">${tickLabel(t)}</text>`)
  }
  rows.forEach((row, i) => {
    const y = TOP + i * ROW_HEIGHT
    const mid = y + ROW_HEIGHT / 2
    out.push(`<text x="${LABEL_WIDTH - 8}" y="${mid + 4}" text-anchor="end"${row.highlight ? ' font-weight="600"' : ""}>${escape(row.label)}</text>`)
    if (row.median !== undefined) {
      const fill = row.warn ? "#d9822b" : row.highlight ? "#2f7d6d" : "#8a99a8"
      const w = Math.max(1, scale.x(row.median))
      out.push(`<rect x="${LABEL_WIDTH}" y="${y + 5}" width="${w}" height="${ROW_HEIGHT - 10}" fill="${fill}"/>`)
      const [x1, x2] = [scale.x(row.min), scale.x(row.max)].map((v) => LABEL_WIDTH + v)
      out.push(`<line x1="${x1}" y1="${mid}" x2="${x2}" y2="${mid}" stroke="#333"/>`)
      out.push(`<line x1="${x1}" y1="${mid - 4}" x2="${x1}" y2="${mid + 4}" stroke="#333"/>`)
      out.push(`<line x1="${x2}" y1="${mid - 4}" x2="${x2}" y2="${mid + 4}" stroke="#333"/>`)
    }
    out.push(`<text x="${LABEL_WIDTH + PLOT + 8}" y="${mid + 4}"${row.warn ? ' fill="#b35c00"' : ""}>${escape(row.text)}</text>`)
  })
  out.push("</svg>")
  return out.join("\n") + "\n"
}
