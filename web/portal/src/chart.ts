import { h, svg } from './dom.js'

/** Spend per day as a bar chart (SVG, no library). Amounts are decimal strings; the chart only needs their shape. */
export function spendChart(days: { date: string; requests: number; cost_usdc: string }[]): HTMLElement {
  // Drawn at about the size it is shown, so labels keep their size.
  const W = 1000
  const H = 200
  const pad = { top: 12, bottom: 22, left: 8, right: 8 }
  const values = days.map((d) => Number(d.cost_usdc))
  const max = Math.max(...values, 0)
  const slot = (W - pad.left - pad.right) / Math.max(days.length, 1)
  const plotH = H - pad.top - pad.bottom
  const bars = days
    .map((d, i) => {
      const v = values[i]!
      // A visible stub for days with requests but a cost too small to draw.
      const height = max > 0 ? Math.max((v / max) * plotH, d.requests > 0 ? 2 : 0) : 0
      const x = pad.left + i * slot + slot * 0.15
      const bar = svg(
        'rect',
        {
          x: x.toFixed(1),
          y: (pad.top + plotH - height).toFixed(1),
          width: (slot * 0.7).toFixed(1),
          height: height.toFixed(1),
          rx: 2,
          class: 'bar',
        },
        svg('title', {}, `${d.date}: $${d.cost_usdc} over ${d.requests} request${d.requests === 1 ? '' : 's'}`),
      )
      const every = Math.ceil(days.length / 7)
      const label =
        i % every === 0 || i === days.length - 1
          ? svg(
              'text',
              { x: (x + slot * 0.35).toFixed(1), y: H - 6, 'text-anchor': 'middle', class: 'axis' },
              d.date.slice(5),
            )
          : null
      return label ? [bar, label] : [bar]
    })
    .flat()
  const base = svg('line', {
    x1: pad.left,
    x2: W - pad.right,
    y1: pad.top + plotH,
    y2: pad.top + plotH,
    class: 'baseline',
  })
  const chart = svg(
    'svg',
    {
      viewBox: `0 0 ${W} ${H}`,
      role: 'img',
      'aria-label': `Spend per day over the last ${days.length} days`,
      class: 'chart',
    },
    base,
    ...bars,
  )
  const total = days.reduce((s, d) => s + d.requests, 0)
  const peak = days[values.indexOf(max)]?.cost_usdc ?? '0.000000'
  return h(
    'figure',
    { class: 'chart-box' },
    chart,
    h(
      'figcaption',
      {},
      `Spend per day, last ${days.length} days (UTC) · ${total} request${total === 1 ? '' : 's'} · peak $${peak}`,
    ),
  )
}
