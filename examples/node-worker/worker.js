// A hookq worker in Node: express + createHyperVerify from the official hyper-connect package.
//
//   QUEUE_SECRET=s3cret PORT=8080 node worker.js
//
// Point a queue at it:  {"target":"http://127.0.0.1:8080/jobs","secret":"s3cret"}
import express from 'express'
import { createHyperVerify } from 'hyper-connect'

const PORT = Number(process.env.PORT ?? 8080)
const HOST = process.env.HOST ?? '127.0.0.1'
const SECRET = process.env.QUEUE_SECRET
const TOLERANCE_MS = 5 * 60 * 1000 // reject jobs signed more than 5 minutes ago (or ahead)

if (!SECRET) {
  console.error('QUEUE_SECRET is required: the secret the queue was created with')
  process.exit(1)
}
const verify = createHyperVerify(SECRET, '5m')

/** Check X-HYPER-SIGNATURE: `t=<unix ms>,sig=<hex HMAC-SHA256(secret, t + "." + body)>`. */
function verifySignature(req, res, next) {
  const header = req.get('x-hyper-signature')
  if (!header) return res.status(401).json({ ok: false, msg: 'missing X-HYPER-SIGNATURE' })

  // createHyperVerify re-serializes the parsed body with JSON.stringify: hookq signs exactly
  // those bytes, so this works for any JSON job.
  const result = verify(header, req.body)
  if (!result.ok) return res.status(401).json({ ok: false, msg: 'bad signature' })

  // hyper-connect 0.12.0 does not enforce its time window, so check the timestamp here.
  const t = Number(/^t=(\d+),/.exec(header)?.[1])
  if (!(Math.abs(Date.now() - t) <= TOLERANCE_MS)) {
    return res.status(401).json({ ok: false, msg: 'signature timestamp outside tolerance' })
  }
  next()
}

// Delivery is at-least-once: a job can arrive twice (a retry after a timeout, a restart).
// X-Hookq-Job-Id is stable across attempts; remember what was done. (In memory here; use
// your database, in the same transaction as the work, in production.)
const done = new Set()

const app = express()
app.use(express.json({ limit: '1mb' }))

app.post('/jobs', verifySignature, async (req, res) => {
  const id = req.get('x-hookq-job-id')
  if (done.has(id)) return res.json({ ok: true, duplicate: true })

  console.log(`job ${id} (attempt ${req.get('x-hookq-attempt')}):`, JSON.stringify(req.body))
  // ... do the work. Throw, or answer non-2xx, and hookq retries with backoff; once attempts
  // are spent the job shows up in GET /queue/<name>?status=ERROR with this response's body.

  done.add(id)
  if (done.size > 100_000) done.delete(done.values().next().value)
  res.json({ ok: true })
})

app.listen(PORT, HOST, () => console.log(`worker listening on http://${HOST}:${PORT}/jobs`))
