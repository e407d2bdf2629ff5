// hookq's deliveries, received by a Node worker that verifies them with hyper-connect's own
// createHyperVerify. hookq promises the delivered body is exactly
// JSON.stringify(JSON.parse(<producer body>)), which is what createHyperVerify re-computes
// from the parsed body; so every payload below must verify, and re-stringifying the parsed
// body must give back the received bytes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { connect, createHyperVerify } from 'hyper-connect'
import { connectionString, env, listen, queueName, rawBody, waitFor, withTimeout } from './helpers.js'

const SECRET = 'compat-secret-✓-0123456789'
const TOLERANCE_MS = 5 * 60 * 1000

// Producer bodies, as raw JSON text. Each is sent twice: through hyper-connect (which sends
// JSON.stringify of the parsed value) and as these exact bytes (so hookq itself has to
// canonicalize 1.0, 1E+2, 12345678901234567890, key order, escapes, whitespace...).
const PAYLOADS = {
  nested: '{"a":{"b":{"c":[1,[2,[3,{"d":null}]]]}},"e":[true,false,null],"f":[{"g":[{"h":{}}]}]}',
  unicode:
    '{"latin":"héllo wörld — ünïcödé","cjk":"日本語テキスト","rtl":"שלום مرحبا",' +
    '"emoji":"😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈","astral":"𝄞 𝕏 𠜎 🀄","escaped":"\\ud83d\\ude00 \\u00e9 \\u65e5",' +
    '"combining":"e\u0301 n\u0303","bom":"\ufeff","nonchar":"\uffff"}',
  floats:
    '{"a":0.1,"b":1e21,"c":1e-7,"d":-0,"e":1.0,"f":1.5e300,"g":5e-324,"h":0.30000000000000004,' +
    '"i":123456789.123456789,"j":1E+2,"k":-1.25e-10,"l":100,"m":1e20,"n":0.000001,"o":2.5E-7,' +
    '"p":-0.0,"q":1.7976931348623157e308,"r":0.1e1,"s":10.50,"t":[1e-6,1e-7,123e18,123e19]}',
  'big integers':
    '{"a":12345678901234567890,"b":9007199254740993,"c":-9223372036854775809,' +
    '"d":18446744073709551616,"e":1000000000000000000000,"f":9007199254740991,' +
    '"g":-12345678901234567890123,"h":0,"i":-1}',
  'integer-like keys':
    '{"b":1,"10":2,"2":3,"a":4,"-1":5,"01":6,"4294967295":7,"4294967294":8,"1.5":9,"0":10,' +
    '"nested":{"z":1,"1":2,"y":3,"0":4}," 3":11,"1e2":12}',
  'empty containers': '{"o":{},"a":[],"s":"","nested":{"x":{},"y":[[]],"z":[{}],"w":[[],{}]}}',
  'control characters and quotes':
    '{"ctl":"\\u0000\\u0001\\b\\f\\n\\r\\t\\u001f\\u007f\\u0080","quotes":"\\"double\\" \'single\' ' +
    '\\\\back\\\\slash /slash \\/escaped","sep":"\\u2028\\u2029","html":"<script>&amp;</script>",' +
    '"\\n key with \\"escapes\\"":true}',
  'unusual keys':
    '{"":"empty key","ключ":"value","😀":"emoji key","a\\"b":1,"__proto__":{"polluted":true},' +
    '"constructor":"c","toString":0}',
  whitespace: ' {\n  "spaced" : [ 1 , 2 , { "x" : "y" } ] ,\t"z":\r\n"w" }\n',
  'one big job': JSON.stringify({
    rows: Array.from({ length: 500 }, (_, i) => ({ i, v: i / 7, s: `row ${i} ✓`, k: { [String(i)]: i } })),
  }),
}

// Producer bodies where hookq may either deliver exactly what JavaScript would, or refuse
// the job with 400 at enqueue; what it must never do is deliver different bytes.
const EDGES = {
  'duplicate keys (JS: the last wins)': '{"a":1,"b":2,"a":3}',
  'lone surrogates': '{"hi":"\\ud800","lo":"\\udc00x"}',
  'number beyond double range (JS: null)': '{"huge":1e400,"tiny":1e-400}',
  'deep nesting (100 levels)': `${'{"a":'.repeat(100)}1${'}'.repeat(100)}`,
}

const canonical = (raw) => JSON.stringify(JSON.parse(raw))

/**
 * A worker in the style of examples/node-worker: reads the raw body, parses it, verifies
 * with createHyperVerify, checks the timestamp itself (createHyperVerify 0.12.0 does not),
 * answers 200, 401, or 500 for jobs that ask for it.
 */
async function verifyingWorker(secret) {
  const verify = createHyperVerify(secret, '5m')
  const deliveries = new Map() // job id -> [{ raw, headers, verdict, status }]
  const worker = await listen(async (req, res) => {
    const raw = await rawBody(req)
    const text = raw.toString('utf8')
    const signature = req.headers['x-hyper-signature']
    const record = { raw, text, headers: req.headers }
    const id = req.headers['x-hookq-job-id']
    if (!deliveries.has(id)) deliveries.set(id, [])
    deliveries.get(id).push(record)

    let body
    try {
      body = JSON.parse(text)
    } catch (e) {
      record.status = 400
      res.writeHead(400).end(`not JSON: ${e.message}`)
      return
    }
    if (signature !== undefined) {
      record.verdict = verify(signature, body)
      const t = Number(/^t=(\d+),/.exec(signature)?.[1])
      record.age = Date.now() - t
      if (!record.verdict.ok || !(Math.abs(record.age) <= TOLERANCE_MS)) {
        record.status = 401
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify(record.verdict))
        return
      }
    }
    if (body && body.mode === 'fail') {
      record.status = 500
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: 'cannot process this job', why: body.why }))
      return
    }
    record.status = 200
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  })
  return { ...worker, deliveries }
}

/** An independent check of X-HYPER-SIGNATURE over the raw bytes received. */
function signatureMatches(header, raw, secret) {
  const m = /^t=(\d+),sig=([0-9a-f]{64})$/.exec(header)
  if (!m) return false
  const expected = createHmac('sha256', secret).update(`${m[1]}.`).update(raw).digest()
  return timingSafeEqual(expected, Buffer.from(m[2], 'hex'))
}

async function enqueueRaw(baseUrl, queue, raw) {
  const res = await fetch(`${baseUrl}/queue/${queue}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: raw,
    signal: AbortSignal.timeout(10_000),
  })
  return { status: res.status, body: await res.json() }
}

async function deliveryOf(worker, id) {
  return waitFor(() => worker.deliveries.get(id)?.[0], { what: `the delivery of job ${id}` })
}

function assertDelivered(record, raw, secret) {
  const expected = canonical(raw)
  // The bytes: exactly JSON.stringify(JSON.parse(producer body)), as UTF-8.
  assert.equal(record.text, expected)
  assert.ok(record.raw.equals(Buffer.from(expected, 'utf8')), 'raw bytes differ from the expected UTF-8')
  // What a worker with body-parser sees: re-stringifying the parsed body gives the raw bytes.
  assert.equal(JSON.stringify(JSON.parse(record.text)), record.text)
  assert.equal(record.headers['content-type'], 'application/json')
  assert.equal(record.headers['x-hookq-attempt'], '1')
  if (secret) {
    assert.match(record.headers['x-hyper-signature'], /^t=\d{13},sig=[0-9a-f]{64}$/)
    assert.deepEqual(record.verdict, { ok: true }, 'createHyperVerify refused the signature')
    assert.ok(signatureMatches(record.headers['x-hyper-signature'], record.raw, secret))
    assert.ok(Math.abs(record.age) < 60_000, `timestamp is ${record.age} ms old`)
  }
  assert.equal(record.status, 200)
}

test('deliveries verify with createHyperVerify for varied payloads', async (t) => {
  const base = env('HOOKQ_OPEN_URL')
  const queue = queueName('verify')
  const worker = await verifyingWorker(SECRET)
  t.after(() => worker.close())
  const hyper = connect(connectionString(base, queue))
  assert.deepEqual(await hyper.queue.create(`${worker.url}/hooks/hyper`, SECRET), { ok: true })
  t.after(() => withTimeout(hyper.queue.destroy(true), 5000, 'destroy').catch(() => {}))

  for (const [name, raw] of Object.entries(PAYLOADS)) {
    await t.test(`${name}, enqueued with hyper-connect`, async () => {
      const { ok, id } = await hyper.queue.enqueue(JSON.parse(raw))
      assert.equal(ok, true)
      assertDelivered(await deliveryOf(worker, id), raw, SECRET)
    })
    await t.test(`${name}, enqueued as raw producer bytes`, async () => {
      const { status, body } = await enqueueRaw(base, queue, raw)
      assert.equal(status, 201, JSON.stringify(body))
      assertDelivered(await deliveryOf(worker, body.id), raw, SECRET)
    })
  }

  await waitFor(async () => (await hyper.queue.queued()).jobs?.length === 0, { what: 'the queue to drain' })
  assert.deepEqual(await hyper.queue.errors(), { ok: true, jobs: [] })
})

test('edge payloads are delivered as JavaScript would, or refused with 400', async (t) => {
  const base = env('HOOKQ_OPEN_URL')
  const queue = queueName('edges')
  const worker = await verifyingWorker(SECRET)
  t.after(() => worker.close())
  const hyper = connect(connectionString(base, queue))
  assert.deepEqual(await hyper.queue.create(`${worker.url}/hooks`, SECRET), { ok: true })
  t.after(() => withTimeout(hyper.queue.destroy(true), 5000, 'destroy').catch(() => {}))

  for (const [name, raw] of Object.entries(EDGES)) {
    await t.test(name, async (t) => {
      const { status, body } = await enqueueRaw(base, queue, raw)
      if (status === 400) {
        t.diagnostic(`refused: ${body.msg}`)
        assert.deepEqual(Object.keys(body).sort(), ['msg', 'ok', 'status'])
        return
      }
      assert.equal(status, 201, JSON.stringify(body))
      t.diagnostic(`accepted; delivered as ${canonical(raw).slice(0, 80)}`)
      assertDelivered(await deliveryOf(worker, body.id), raw, SECRET)
    })
  }
})

test('a queue without a secret delivers unsigned', async (t) => {
  const base = env('HOOKQ_OPEN_URL')
  const queue = queueName('unsigned')
  const worker = await verifyingWorker(SECRET)
  t.after(() => worker.close())
  const hyper = connect(connectionString(base, queue))
  assert.deepEqual(await hyper.queue.create(`${worker.url}/hooks`), { ok: true })
  t.after(() => withTimeout(hyper.queue.destroy(true), 5000, 'destroy').catch(() => {}))
  const raw = PAYLOADS['integer-like keys']
  const { id } = await hyper.queue.enqueue(JSON.parse(raw))
  const record = await deliveryOf(worker, id)
  assert.equal(record.headers['x-hyper-signature'], undefined)
  assertDelivered(record, raw, null)
})

test('a job the worker fails (500) ends in queue.errors() with the response body', async (t) => {
  const base = env('HOOKQ_AUTH_URL') // with credentials, for good measure
  const queue = queueName('fails')
  const worker = await verifyingWorker(SECRET)
  t.after(() => worker.close())
  const hyper = connect(connectionString(base, queue, { user: 'app', key: env('HOOKQ_KEY') }))
  assert.deepEqual(await hyper.queue.create(`${worker.url}/hooks`, SECRET), { ok: true })
  t.after(() => withTimeout(hyper.queue.destroy(true), 5000, 'destroy').catch(() => {}))

  const fine = await hyper.queue.enqueue({ mode: 'ok', n: 1 })
  const doomed = { mode: 'fail', why: 'ünïcode reason ✗ 😀', amount: 0.1 }
  const failing = await hyper.queue.enqueue(doomed)
  assert.equal(failing.ok, true)

  // HOOKQ_MAX_ATTEMPTS=2, HOOKQ_BACKOFF=50ms: two attempts, then ERROR.
  const errors = await waitFor(
    async () => {
      const r = await hyper.queue.errors()
      return r.jobs?.length === 1 && r
    },
    { what: 'the failing job to reach ERROR' },
  )
  const [dead] = errors.jobs
  assert.equal(dead.id, failing.id)
  assert.equal(dead.status, 'ERROR')
  assert.equal(dead.queue, queue)
  assert.deepEqual(dead.job, doomed)
  assert.equal(dead.attempts, 2)
  assert.equal(dead.lastStatus, 500)
  assert.equal(dead.error, JSON.stringify({ error: 'cannot process this job', why: doomed.why }))

  const attempts = worker.deliveries.get(failing.id)
  assert.equal(attempts.length, 2)
  assert.deepEqual(attempts.map((a) => a.headers['x-hookq-attempt']), ['1', '2'])
  for (const a of attempts) {
    assert.deepEqual(a.verdict, { ok: true })
    assert.equal(a.status, 500)
  }
  assert.equal(worker.deliveries.get(fine.id)?.[0]?.status, 200)
  assert.deepEqual((await hyper.queue.queued()).jobs, [])
})
