// The baseline: a raw pass-through in a few lines of node:http + undici, forwarding to one upstream.
import { createServer } from 'node:http'
import { Pool } from 'undici'

const upstream = new URL(process.argv[2])
const pool = new Pool(upstream.origin, { connections: 256, pipelining: 1 })
const server = createServer(async (req, res) => {
  const chunks = []
  for await (const c of req) chunks.push(c)
  const up = await pool.request({
    path: `${upstream.pathname}/chat/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: Buffer.concat(chunks),
  })
  res.writeHead(up.statusCode, { 'content-type': up.headers['content-type'] })
  for await (const c of up.body) res.write(c)
  res.end()
})
server.keepAliveTimeout = 30_000
server.listen(0, '127.0.0.1', () =>
  console.log(JSON.stringify({ base_url: `http://127.0.0.1:${server.address().port}` })),
)
