// What the official hyper-connect client puts on the wire for the Queue service, recorded by
// a stub server on 127.0.0.1 (no hookq involved). This pins down the contract hookq must
// honour: paths, methods, headers, bodies and the JWT it signs with the connection string's
// password.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { connect, createHyperVerify } from 'hyper-connect'
import { connectionString, listen, rawBody } from './helpers.js'

async function recorder() {
  const requests = []
  const stub = await listen(async (req, res) => {
    const body = (await rawBody(req)).toString('utf8')
    requests.push({ method: req.method, url: req.url, headers: req.headers, body })
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ ok: true, jobs: [] }))
  })
  return { ...stub, requests }
}

function decodeJwt(token) {
  const [h, p, s] = token.split('.')
  const json = (part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
  return { header: json(h), payload: json(p), signingInput: `${h}.${p}`, signature: s }
}

test('queue calls: paths, methods, bodies, no auth header without credentials', async (t) => {
  const stub = await recorder()
  t.after(() => stub.close())
  const hyper = connect(connectionString(stub.url, 'orders'))

  await hyper.queue.create('http://127.0.0.1:9/worker', 'shh')
  await hyper.queue.create('http://127.0.0.1:9/worker')
  await hyper.queue.enqueue({ b: 1, a: [true, null] })
  await hyper.queue.queued()
  await hyper.queue.errors()
  await hyper.queue.destroy(true)
  await assert.rejects(hyper.queue.destroy(false), { ok: false, msg: 'request not confirmed!' })

  const seen = stub.requests.map(({ method, url, body }) => ({ method, url, body }))
  assert.deepEqual(seen, [
    { method: 'PUT', url: '/queue/orders', body: '{"target":"http://127.0.0.1:9/worker","secret":"shh"}' },
    // An undefined secret is dropped by JSON.stringify: the key is absent, not null.
    { method: 'PUT', url: '/queue/orders', body: '{"target":"http://127.0.0.1:9/worker"}' },
    { method: 'POST', url: '/queue/orders', body: '{"b":1,"a":[true,null]}' },
    { method: 'GET', url: '/queue/orders?status=READY', body: '' },
    { method: 'GET', url: '/queue/orders?status=ERROR', body: '' },
    { method: 'DELETE', url: '/queue/orders', body: '' },
  ])
  for (const r of stub.requests) {
    // Sent on every request, bodiless GET and DELETE included.
    assert.equal(r.headers['content-type'], 'application/json')
    assert.equal(r.headers.authorization, undefined)
  }
})

test('credentials in the connection string become a short-lived HS256 JWT', async (t) => {
  const stub = await recorder()
  t.after(() => stub.close())
  const key = 'compat-key-0123456789'
  const hyper = connect(connectionString(stub.url, 'orders', { user: 'app', key }))

  const before = Math.floor(Date.now() / 1000)
  await hyper.queue.queued()
  const after = Math.floor(Date.now() / 1000)

  const [r] = stub.requests
  const match = /^Bearer (.+)$/.exec(r.headers.authorization)
  assert.ok(match, `expected a Bearer token, got ${r.headers.authorization}`)
  const jwt = decodeJwt(match[1])
  assert.deepEqual(jwt.header, { alg: 'HS256' })
  // Claims: `sub` = the user part of the URL, `exp` = now + 10 minutes, nothing else.
  assert.deepEqual(Object.keys(jwt.payload).sort(), ['exp', 'sub'])
  assert.equal(jwt.payload.sub, 'app')
  assert.ok(jwt.payload.exp >= before + 600 && jwt.payload.exp <= after + 600)
  // Signed with the password part of the URL, as UTF-8 bytes.
  const expected = createHmac('sha256', Buffer.from(key, 'utf8')).update(jwt.signingInput).digest('base64url')
  assert.equal(jwt.signature, expected)
})

test('a password is used percent-encoded, exactly as it appears in the URL', async (t) => {
  // new URL(...).password keeps percent-escapes, and hyper-connect signs with that string.
  // A key containing URL-reserved characters therefore has to be used pre-encoded on the
  // server side too; hookq keys should stick to [A-Za-z0-9._~-].
  const stub = await recorder()
  t.after(() => stub.close())
  const hyper = connect(connectionString(stub.url, 'orders', { user: 'app', key: 'a/b=c' }))
  await hyper.queue.queued()
  const jwt = decodeJwt(/^Bearer (.+)$/.exec(stub.requests[0].headers.authorization)[1])
  const sign = (k) => createHmac('sha256', k).update(jwt.signingInput).digest('base64url')
  assert.equal(jwt.signature, sign('a%2Fb%3Dc'))
  assert.notEqual(jwt.signature, sign('a/b=c'))
})

test('createHyperVerify (0.12.0) does not enforce its time tolerance', () => {
  // Documented here because docs/signatures.md tells workers to check `t` themselves:
  // the client's verifyTimeGap reads a path that no longer exists after the header is
  // split, computes NaN, and lets every timestamp through.
  const secret = 'shh'
  const body = { hello: 'world' }
  const t = 1 // 1 ms after the epoch: decades outside any tolerance
  const sig = createHmac('sha256', secret).update(`${t}.${JSON.stringify(body)}`).digest('hex')
  const verify = createHyperVerify(secret, '1m')
  assert.deepEqual(verify(`t=${t},sig=${sig}`, body), { ok: true })
  // A wrong signature is refused, with `message` (not `msg`).
  assert.deepEqual(verify(`t=${t},sig=${'0'.repeat(64)}`, body), {
    ok: false,
    status: 401,
    message: 'Unauthorized',
  })
})
