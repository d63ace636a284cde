/** A tiny view layer: build elements from data, replace a region's children. No framework, no virtual DOM. */

type Child = Node | string | number | null | undefined | false
type Handler = (ev: Event) => void
export type Attrs = Record<string, string | number | boolean | Handler | null | undefined>

/**
 * `h('button', { class: 'primary', onclick: save }, 'Save')`; `on…` attributes become listeners, false/null are
 * skipped.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue
    if (typeof value === 'function') el.addEventListener(name.slice(2), value)
    else if (name in el && typeof value !== 'string') (el as unknown as Record<string, unknown>)[name] = value
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function append(parent: Node, children: (Child | Child[])[]): void {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue
    parent.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)))
  }
}

/** Replaces the element's content. */
export function mount(el: Element, ...children: (Child | Child[])[]): void {
  el.replaceChildren()
  append(el, children)
}

const SVG_NS = 'http://www.w3.org/2000/svg'

export function svg(tag: string, attrs: Record<string, string | number>, ...children: (Node | string)[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag)
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v))
  for (const c of children) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c)
  return el
}

/** A form's named text inputs. */
export function fieldsOf(form: HTMLFormElement): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of new FormData(form)) if (typeof v === 'string') out[k] = v
  return out
}

/** A status line that pages write errors and confirmations into. */
export function notice(kind: 'error' | 'ok', text: string): HTMLElement {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text)
}

/**
 * A table that fits its page at any width: it scrolls inside its own frame when wider than the page, and on a narrow
 * screen each row stands as a block of `label: value` lines (style.css). Rows added to `body` later are labelled too.
 */
export function dataTable(cls: string, headers: string[], body: HTMLTableSectionElement): HTMLElement {
  const label = (row: Element) => {
    Array.from(row.children).forEach((cell, i) => {
      const name = headers[i]
      if (name && cell.getAttribute('colspan') === null) cell.setAttribute('data-label', name)
    })
  }
  const labelAll = () => Array.from(body.rows).forEach(label)
  labelAll()
  new MutationObserver(labelAll).observe(body, { childList: true })
  const head = h(
    'thead',
    {},
    h(
      'tr',
      {},
      headers.map((t) => h('th', {}, t)),
    ),
  )
  return h('div', { class: 'table-wrap' }, h('table', { class: cls }, head, body))
}
