import { createServer, connect, type Server, type Socket } from 'node:net'

/** A TCP proxy to `host:port` that a test can cut (every connection closed, new ones refused) and restore. */
export interface TcpProxy {
  port: number
  cut(): Promise<void>
  restore(): Promise<void>
  close(): Promise<void>
}

export async function tcpProxy(host: string, port: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>()
  const track = (s: Socket) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
    return s
  }
  const serve = (): Server =>
    createServer((client) => {
      const upstream = track(connect(port, host))
      track(client)
      client.pipe(upstream).pipe(client)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
    })
  const listen = (server: Server, at: number) =>
    new Promise<number>((resolve, reject) =>
      server.once('error', reject).listen(at, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
    )
  let server: Server | undefined = serve()
  const proxyPort = await listen(server, 0)
  const stop = async () => {
    const s = server
    server = undefined
    for (const socket of sockets) socket.destroy()
    if (s) await new Promise((resolve) => s.close(resolve))
  }
  return {
    port: proxyPort,
    cut: stop,
    restore: async () => {
      if (server) return
      server = serve()
      await listen(server, proxyPort)
    },
    close: stop,
  }
}
