// The Queue service through the official client against a real hookq: create, enqueue,
// queued, errors, destroy; on an open server and on one with an API key (credentials in
// the connection string), and a wrong or missing key refused.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'hyper-connect'
import { connectionString, env, listen, queueName, rawBody, waitFor } from './helpers.js'

/**
 * A worker whose answers the test controls: it holds each delivery until `release()` (so a
 * job stays READY and in flight), then answers 200, or 500 with a body when `failing`.
 */
async function controllableWorker() {
  const held = []
  const received = []
  let failing = false
  let holding = true
  const worker = await listen(async (req, res) => {
    const body = (await rawBody(req)).toString('utf8')
    received.push({ headers: req.headers, body })
    const answer = () => {
      if (failing) {
        res.writeHead(500, { 'content-type': 'text/plain' })
        res.end(`worker refused ${req.headers['x-hookq-job-id']}`)
      } else {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end('{"ok":true}')
      }
    }
    if (holding) held.push(answer)
    else answer()
  })
  return {
    ...worker,
    received,
    held,
    release() {
      holding = false
      held.splice(0).forEach((answer) => answer())
    },
    fail() {
      failing = true
      this.release()
    },
    close() {
      this.release()
      return worker.close()
    },
  }
}

async function lifecycle(t, hyper) {
  const worker = await controllableWorker()
  t.after(() => worker.close())

  // create: 201 {ok:true}; the client resolves with the body.
  assert.deepEqual(await hyper.queue.create(`${worker.url}/jobs`, 'a-secret'), { ok: true })
  // creating it again: 409, resolved (not rejected) with the status added.
  const again = await hyper.queue.create(`${worker.url}/jobs`)
  assert.equal(again.ok, false)
  assert.equal(again.status, 409)
  assert.equal(typeof again.msg, 'string')

  // enqueue: 201 {ok:true,id}. The worker holds the delivery, so the job stays READY.
  const job = { orderId: 42, items: [{ sku: 'A-1', qty: 2 }], note: 'héllo ✓' }
  const enqueued = await hyper.queue.enqueue(job)
  assert.equal(enqueued.ok, true)
  assert.match(enqueued.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/)

  // queued: READY jobs, including the one in flight.
  const queued = await hyper.queue.queued()
  assert.equal(queued.ok, true)
  assert.equal(queued.jobs.length, 1)
  const [listed] = queued.jobs
  assert.equal(listed.id, enqueued.id)
  assert.equal(listed.status, 'READY')
  assert.deepEqual(listed.job, job)
  assert.equal(typeof listed.createdAt, 'number')

  // Let it through: it is delivered, signed, and leaves the queue.
  await waitFor(() => worker.held.length === 1, { what: 'the delivery to reach the worker' })
  worker.release()
  await waitFor(async () => (await hyper.queue.queued()).jobs?.length === 0, { what: 'the job to be acknowledged' })
  const [delivery] = worker.received
  assert.equal(delivery.headers['x-hookq-job-id'], enqueued.id)
  assert.match(delivery.headers['x-hyper-signature'], /^t=\d{13},sig=[0-9a-f]{64}$/)
  assert.deepEqual(JSON.parse(delivery.body), job)

  // errors: empty until a job has spent its attempts (HOOKQ_MAX_ATTEMPTS=2), then shows it
  // with the worker's response body.
  assert.deepEqual(await hyper.queue.errors(), { ok: true, jobs: [] })
  worker.fail()
  const failed = await hyper.queue.enqueue({ doomed: true })
  assert.equal(failed.ok, true)
  const errors = await waitFor(
    async () => {
      const r = await hyper.queue.errors()
      return r.jobs?.length === 1 && r
    },
    { what: 'the failing job to be dead-lettered' },
  )
  const [dead] = errors.jobs
  assert.equal(dead.id, failed.id)
  assert.equal(dead.status, 'ERROR')
  assert.deepEqual(dead.job, { doomed: true })
  assert.equal(dead.attempts, 2)
  assert.equal(dead.error, `worker refused ${failed.id}`)
  assert.equal(dead.lastStatus, 500)
  assert.deepEqual((await hyper.queue.queued()).jobs, [])

  // destroy: refused without confirmation (client side), then removes the queue.
  await assert.rejects(hyper.queue.destroy(false), { ok: false })
  assert.deepEqual(await hyper.queue.destroy(true), { ok: true })
  const gone = await hyper.queue.queued()
  assert.equal(gone.ok, false)
  assert.equal(gone.status, 404)
  const enqueueGone = await hyper.queue.enqueue({ late: true })
  assert.equal(enqueueGone.status, 404)
  const destroyGone = await hyper.queue.destroy(true)
  assert.equal(destroyGone.status, 404)
}

test('open server: connection string without credentials', async (t) => {
  const hyper = connect(connectionString(env('HOOKQ_OPEN_URL'), queueName('open')))
  await lifecycle(t, hyper)
})

test('open server: credentials in the connection string are harmless', async (t) => {
  const hyper = connect(connectionString(env('HOOKQ_OPEN_URL'), queueName('open-creds'), { user: 'app', key: 'anything' }))
  await lifecycle(t, hyper)
})

test('API key server: credentials in the connection string (HS256 JWT)', async (t) => {
  const hyper = connect(connectionString(env('HOOKQ_AUTH_URL'), queueName('auth'), { user: 'app', key: env('HOOKQ_KEY') }))
  await lifecycle(t, hyper)
})

test('API key server: the JWT subject is not checked, only the signature and exp', async () => {
  const queue = queueName('auth-sub')
  const hyper = connect(connectionString(env('HOOKQ_AUTH_URL'), queue, { user: 'someone-else', key: env('HOOKQ_KEY') }))
  assert.deepEqual(await hyper.queue.create('http://127.0.0.1:9/never'), { ok: true })
  assert.deepEqual(await hyper.queue.destroy(true), { ok: true })
})

test('API key server: a wrong key or no key is refused with 401 on every call', async () => {
  const base = env('HOOKQ_AUTH_URL')
  const queue = queueName('auth-refused')
  const owner = connect(connectionString(base, queue, { user: 'app', key: env('HOOKQ_KEY') }))
  assert.deepEqual(await owner.queue.create('http://127.0.0.1:9/never'), { ok: true })

  const clients = {
    'wrong key': connect(connectionString(base, queue, { user: 'app', key: `${env('HOOKQ_KEY')}x` })),
    'no credentials': connect(connectionString(base, queue)),
  }
  for (const [what, hyper] of Object.entries(clients)) {
    const calls = {
      create: () => hyper.queue.create('http://127.0.0.1:9/other'),
      enqueue: () => hyper.queue.enqueue({ sneaky: true }),
      queued: () => hyper.queue.queued(),
      errors: () => hyper.queue.errors(),
      destroy: () => hyper.queue.destroy(true),
    }
    for (const [name, call] of Object.entries(calls)) {
      assert.deepEqual(await call(), { ok: false, status: 401, msg: 'not authorized' }, `${what}: ${name}`)
    }
  }
  // Nothing the refused calls tried happened.
  assert.deepEqual(await owner.queue.queued(), { ok: true, jobs: [] })
  assert.deepEqual(await owner.queue.destroy(true), { ok: true })
})
