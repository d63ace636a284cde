import { clipped, unsupported, type ApiError } from '../../protocol/errors.js'
import { responseId, type InputItem, type OutputItem } from '../../protocol/responses.js'
import { RESPONSE_RETENTION_MS, type KeptEntry, type KeptResponseRepo } from '../../store/kept-responses.js'
import type { SentItem } from '../../protocol/responses.js'
import { inputOf } from './output.js'

/** An input item read or resolved, with the request field it came from. */
export interface PlacedItem {
  item: InputItem
  origin: string
}

const RETENTION = `${RESPONSE_RETENTION_MS / 3_600_000} hours`

/**
 * What the Responses API keeps per key, as a request reads it: a response's conversation for `previous_response_id`,
 * an output item for `item_reference` (docs/interface.md). A reference to nothing kept is refused, naming its field.
 */
export class ResponseMemory {
  constructor(
    private readonly repo: KeptResponseRepo,
    private readonly now: () => number,
  ) {}

  /** The conversation a request continues, then its own items, references replaced by what they name. */
  async resolve(
    keyId: string,
    previous: string | undefined,
    sent: readonly { item: SentItem; origin: string }[],
  ): Promise<PlacedItem[] | ApiError> {
    const ids = sent.flatMap(({ item }) => (item.type === 'item_reference' ? [item.id] : []))
    if (previous !== undefined) ids.push(previous)
    const kept = await this.repo.read(keyId, ids, this.now())
    const placed: PlacedItem[] = []
    if (previous !== undefined) {
      const body = kept.get(previous)
      const items = body === undefined ? undefined : (JSON.parse(body) as unknown)
      if (!Array.isArray(items)) return notKept('previous_response_id', 'response', previous)
      for (const item of items as InputItem[]) placed.push({ item, origin: 'previous_response_id' })
    }
    for (const { item, origin } of sent) {
      if (item.type !== 'item_reference') {
        placed.push({ item, origin })
        continue
      }
      const body = kept.get(item.id)
      const found = body === undefined ? undefined : (JSON.parse(body) as unknown)
      if (found === undefined || Array.isArray(found)) return notKept(`${origin}.id`, 'item', item.id)
      // A kept reasoning item: referred to, it is dropped as a sent one is.
      if (found === null) continue
      placed.push({ item: found as InputItem, origin })
    }
    return placed
  }

  /** Keeps a delivered response: its conversation (without instructions) and output under their ids. */
  async keep(
    keyId: string,
    requestId: string,
    conversation: readonly InputItem[],
    output: OutputItem[],
  ): Promise<void> {
    const outputs = output.map(inputOf)
    const said = outputs.filter((i): i is InputItem => i !== null)
    const entries: KeptEntry[] = [{ id: responseId(requestId), body: JSON.stringify([...conversation, ...said]) }]
    output.forEach((item, i) => entries.push({ id: item.id, body: JSON.stringify(outputs[i]) }))
    await this.repo.keep(keyId, entries, this.now())
  }
}

function notKept(param: string, what: string, id: string): ApiError {
  return unsupported(
    param,
    `No ${what} ${JSON.stringify(clipped(id))} is kept for this key: output is kept for ${RETENTION}, ` +
      'per key, unless the request had store: false.',
  )
}
