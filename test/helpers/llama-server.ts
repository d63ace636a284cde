import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'
import { ENGINES_DIR } from '../../src/engine/node-llama.js'
import { ENGINE_INSTALLED } from './engine.js'

// llama.cpp's own server, built from the source node-llama-cpp ships (scripts/build-llama-server.mjs, cached outside
// the checkout). Tests that need it skip when it has not been built.

function builtServer(): string | undefined {
  if (!ENGINE_INSTALLED) return undefined
  try {
    const args = ['scripts/build-llama-server.mjs', '--check', '--engines', ENGINES_DIR]
    const path = execFileSync(process.execPath, args, { encoding: 'utf8' }).trim()
    return existsSync(path) ? path : undefined
  } catch {
    return undefined
  }
}

/** The built llama-server, or undefined. */
export const LLAMA_SERVER = builtServer()

/** A port nothing listens on now (the server is told to take it). */
async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise((resolve) => probe.close(resolve))
  return port
}

export interface LlamaServer {
  /** Its OpenAI-compatible API, ending in /v1. */
  url: string
  stop(): Promise<void>
}

/**
 * Starts llama-server on `model` (a GGUF file) with `extra` arguments, once it answers /health. Its weights are not
 * repacked (`--no-repack`): on a CPU with AMX (a build for the machine's own CPU has ggml's AMX kernels) the repacked
 * q4_0 weights crash its matrix product in an embedding model's warm-up (a segmentation fault at start).
 */
export async function startLlamaServer(model: string, extra: string[] = []): Promise<LlamaServer> {
  const port = await freePort()
  const args = [
    '-m',
    model,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-c',
    '4096',
    '-np',
    '2',
    '-t',
    '1',
    '--no-repack',
  ]
  const server: ChildProcess = spawn(LLAMA_SERVER!, [...args, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] })
  // The last of what it says on stderr, for the error when it does not come up.
  let said = ''
  server.stderr!.setEncoding('utf8').on('data', (d: string) => (said = (said + d).slice(-2000)))
  let failed: Error | undefined
  server.once('error', (err) => (failed = err))
  const url = `http://127.0.0.1:${port}`
  const notUp = (why: string) => new Error(`llama-server ${why} before it answered /health:\n${said}`)
  for (let i = 0; ; i++) {
    if (failed) throw notUp(`could not start (${failed.message})`)
    if (server.exitCode !== null || server.signalCode !== null)
      throw notUp(`exited (${server.exitCode ?? server.signalCode})`)
    const up = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    )
    if (up) break
    if (i === 300) {
      server.kill('SIGKILL')
      throw notUp('took more than 30 s')
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    url: `${url}/v1`,
    async stop() {
      if (server.exitCode === null && server.signalCode === null) {
        server.kill()
        await once(server, 'exit')
      }
    },
  }
}
