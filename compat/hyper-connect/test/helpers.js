// Shared helpers for the hyper-connect compatibility tests.
//
// run.sh starts two hookq servers and passes them in through the environment:
//   HOOKQ_OPEN_URL  http://127.0.0.1:PORT   (no API key)
//   HOOKQ_AUTH_URL  http://127.0.0.1:PORT   (HOOKQ_API_KEY=$HOOKQ_KEY)
//   HOOKQ_KEY       the API key of the second server
// Both run with HOOKQ_MAX_ATTEMPTS=2 and HOOKQ_BACKOFF=50ms.
// Every address used here is 127.0.0.1: hookq, the workers and the wire recorder.
import http from 'node:http'
import { randomBytes } from 'node:crypto'

export function env(name) {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set: run the tests through compat/hyper-connect/run.sh`)
  return value
}

/** A queue name that no other test uses. */
export function queueName(prefix) {
  return `${prefix}-${randomBytes(4).toString('hex')}`
}

/** `http://127.0.0.1:PORT` + optional `user:key@` + `/queue`: the hyper connection string. */
export function connectionString(baseUrl, queue, credentials) {
  const url = new URL(baseUrl)
  if (credentials) {
    url.username = credentials.user
    url.password = credentials.key
  }
  url.pathname = `/${queue}`
  return url.toString()
}

/**
 * Start a node:http server on 127.0.0.1 with an ephemeral port.
 * Returns { server, url, close() } where close() never hangs.
 */
export async function listen(handler) {
  const server = http.createServer(handler)
  server.keepAliveTimeout = 1000
  server.headersTimeout = 5000
  server.requestTimeout = 5000
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address()
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** Read a request body as raw bytes (a Buffer), bounded in size. */
export function rawBody(req, limit = 1 << 20) {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', (chunk) => {
      size += chunk.length
      if (size > limit) {
        reject(new Error('body too large'))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

/** Poll `check` (async, returns a truthy value when done) until it succeeds or time runs out. */
export async function waitFor(check, { timeoutMs = 10_000, intervalMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  while (Date.now() < deadline) {
    last = await check()
    if (last) return last
    await new Promise((r) => setTimeout(r, intervalMs))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

/** A promise that rejects after `ms`, for racing against something that might hang. */
export function withTimeout(promise, ms, what) {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}
