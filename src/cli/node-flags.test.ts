import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { GATEWAY_NODE_FLAGS, GATEWAY_V8_SETTINGS, missingNodeFlags, v8SettingsToApply } from './node-flags.js'

describe("the gateway's node flags", () => {
  it("are missing until node's command line or NODE_OPTIONS sets them, with any value and either spelling", () => {
    expect(missingNodeFlags([])).toEqual(['--max-semi-space-size=32'])
    expect(missingNodeFlags(['--max-old-space-size=4096', '--cpu-prof'], '--trace-warnings')).toEqual([
      '--max-semi-space-size=32',
    ])
    expect(missingNodeFlags(['--max-semi-space-size=16'])).toEqual([])
    expect(missingNodeFlags([], '--enable-source-maps  --max_semi_space_size=128')).toEqual([])
    // A flag of another name that merely starts the same does not count.
    expect(missingNodeFlags(['--max-semi-space-size-x=1'])).toEqual(['--max-semi-space-size=32'])
  })

  it('leave a V8 setting the command line gives to its value, and apply the rest', () => {
    expect(v8SettingsToApply([])).toEqual(GATEWAY_V8_SETTINGS)
    expect(v8SettingsToApply(['--heap_growing_percent=100', '--cpu-prof'])).toEqual([])
    expect(v8SettingsToApply(['--heap-growing-percent-x=1'])).toEqual(GATEWAY_V8_SETTINGS)
  })

  it("are the ones `npm start` gives node, while `svc`'s shebang stays portable", () => {
    // `env -S` is missing from BusyBox: a shebang passing flags would stop every command on Alpine.
    expect(readFileSync('src/cli/main.ts', 'utf8').split('\n', 1)[0]).toBe('#!/usr/bin/env node')
    const start = JSON.parse(readFileSync('package.json', 'utf8')).scripts.start as string
    expect(start).toBe(`node ${GATEWAY_NODE_FLAGS.join(' ')} dist/cli/main.js demo`)
  })
})
