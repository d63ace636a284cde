/**
 * A generation's text split into reasoning and content, as llama.cpp's server parses a reasoning model's output: what
 * comes between an opening `<think>` (at the start of the reply) and `</think>` is reasoning, the rest content. A tag
 * cut between two pieces of text is held until the next one tells.
 */
export class ThinkSplit {
  /** `answerStart`: the thought ended, and the line breaks after it are not yet past. */
  private state: 'start' | 'thinking' | 'answerStart' | 'answering' = 'start'
  private held = ''

  /** The reasoning and content that `text` adds. */
  push(text: string): { reasoning: string; content: string } {
    let rest = this.held + text
    this.held = ''
    const out = { reasoning: '', content: '' }
    if (this.state === 'start') {
      const trimmed = rest.trimStart()
      if ('<think>'.startsWith(trimmed)) {
        this.held = rest
        return out
      }
      if (trimmed.startsWith('<think>')) {
        this.state = 'thinking'
        rest = trimmed.slice('<think>'.length)
      } else this.state = 'answering'
    }
    if (this.state === 'thinking') {
      const end = rest.indexOf('</think>')
      if (end < 0) {
        const keep = partialTag(rest, '</think>')
        out.reasoning = rest.slice(0, rest.length - keep)
        this.held = rest.slice(rest.length - keep)
        return out
      }
      out.reasoning = rest.slice(0, end)
      this.state = 'answerStart'
      rest = rest.slice(end + '</think>'.length)
    }
    if (this.state === 'answerStart') {
      rest = rest.replace(/^\s+/, '')
      if (rest !== '') this.state = 'answering'
    }
    out.content = rest
    return out
  }

  /** What is held at the end of the generation. */
  end(): { reasoning: string; content: string } {
    const held = this.held
    this.held = ''
    return this.state === 'thinking' ? { reasoning: held, content: '' } : { reasoning: '', content: held }
  }
}

/** How many characters at the end of `text` begin `tag`. */
function partialTag(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (tag.startsWith(text.slice(-n))) return n
  return 0
}
