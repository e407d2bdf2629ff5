#!/usr/bin/env node
// Generates tests/vectors.json: X-HYPER-SIGNATURE test vectors, every verdict in it
// obtained from `createHyperVerify` of the real npm package hyper-connect (the version
// pinned in compat/hyper-connect/package-lock.json). tests/vectors.rs checks the Rust
// crate against the file; that test needs neither Node nor npm.
//
// How to regenerate, from the workspace root:
//
//   (cd compat/hyper-connect && npm ci --no-audit --no-fund)    # hyper-connect@0.12.0
//   node crates/hookq-signature/tests/make_vectors.js           # rewrites tests/vectors.json
//   node crates/hookq-signature/tests/make_vectors.js --check   # exit 1 if it would change
//   cargo test -p hookq-signature --test vectors
//
// HYPER_CONNECT_DIR=<dir> takes hyper-connect from <dir>/node_modules instead of
// compat/hyper-connect/node_modules.
//
// The output is deterministic: fixed secrets, bodies and timestamps, and each verdict is
// taken with the clock set to a fixed `now` (see atClock), so regenerating with the same
// hyper-connect version gives the same file, byte for byte.
//
// What a vector means:
//   header = `t=${t},sig=${hex HMAC-SHA256(secret, `${t}.${JSON.stringify(JSON.parse(body))}`)}`
// which is how hyper's queue signs and what createHyperVerify recomputes. Every body in
// "accepted" is canonical (JSON.stringify(JSON.parse(body)) === body, asserted below), so
// that HMAC is also the HMAC over the body's raw bytes, which is what hookq signs and
// what the Rust `verify` checks.
//
// Three lists:
//   accepted   createHyperVerify(secret, "5m")(header, JSON.parse(body)) returns ok at
//              now = timestamp_ms; Rust must accept it too and `sign` must give `sig`.
//   rejected   createHyperVerify rejects it (or throws) at now = now_ms; Rust must
//              reject it with the error kind in `rust` (mismatch or malformed).
//   divergent  the two disagree, on purpose: hyper-connect 0.12.0 does not enforce its
//              ttl, compares hex case-sensitively, hashes re-serialized JSON and takes
//              any text as the timestamp. `note` says which; `rust` is Rust's verdict.
"use strict";

const { createHmac } = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const root = path.resolve(__dirname, "..", "..", "..");
const hcDir = process.env.HYPER_CONNECT_DIR
  ? path.resolve(process.env.HYPER_CONNECT_DIR)
  : path.join(root, "compat", "hyper-connect");
const hcRequire = createRequire(path.join(hcDir, "package.json"));
let createHyperVerify, hcVersion;
try {
  ({ createHyperVerify } = hcRequire("hyper-connect"));
  const pkg = path.join(hcDir, "node_modules", "hyper-connect", "package.json");
  hcVersion = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
} catch (e) {
  console.error(`cannot load hyper-connect from ${hcDir}/node_modules: ${e.message}`);
  console.error("install it first: (cd compat/hyper-connect && npm ci --no-audit --no-fund)");
  process.exit(2);
}

const TTL = "5m";
const TOLERANCE_MS = 5 * 60 * 1000;
const SECRET = "s3cret";
const T = 1700000000000; // 2023-11-14T22:13:20Z
const T2 = 1735689600000; // 2025-01-01T00:00:00Z

const hmacHex = (secret, text) =>
  createHmac("sha256", secret, { encoding: "utf8" }).update(text).digest("hex");
// The way hyper's queue signs a job.
const sigFor = (secret, t, body) => hmacHex(secret, `${t}.${JSON.stringify(JSON.parse(body))}`);
const headerFor = (secret, t, body) => `t=${t},sig=${sigFor(secret, t, body)}`;

// createHyperVerify compares the header's time with `new Date().getTime()`. To get a
// verdict that does not depend on when this script runs, run it with the global Date
// pinned to `nowMs` (new Date() and Date.now() return nowMs; every other use of Date is
// unchanged). hyper-connect 0.12.0 in fact never rejects a timestamp (see the
// "divergent" vectors), but this keeps the verdicts honest for versions that do.
function atClock(nowMs, fn) {
  const RealDate = globalThis.Date;
  class FixedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(nowMs);
      else super(...args);
    }
    static now() {
      return nowMs;
    }
  }
  globalThis.Date = FixedDate;
  try {
    if (new Date().getTime() !== nowMs || Date.now() !== nowMs) throw new Error("clock not pinned");
    return fn();
  } finally {
    globalThis.Date = RealDate;
  }
}

// createHyperVerify's verdict, and its raw result (or the exception it threw: it throws on
// headers without a `,`).
function hyperVerify(secret, header, body, nowMs) {
  const payload = JSON.parse(body);
  try {
    const result = atClock(nowMs, () => createHyperVerify(secret, TTL)(header, payload));
    return { accepted: result !== null && typeof result === "object" && result.ok === true, result };
  } catch (e) {
    return { accepted: false, result: { threw: `${e.name}: ${e.message}` } };
  }
}

const isCanonical = (body) => JSON.stringify(JSON.parse(body)) === body;

// ---------------------------------------------------------------------------------------
// accepted: canonical bodies, as hookq sends them.

const LONG_SECRET = "0123456789abcdef".repeat(8); // 128 bytes, longer than SHA-256's block
const accepted = [
  { name: "ascii object", secret: SECRET, t: T, body: String.raw`{"hello":"world"}` },
  {
    name: "job with nested object and array",
    secret: SECRET,
    t: T2,
    body: String.raw`{"to":"ana@example.com","subject":"Welcome","amount_cents":1999,"tags":["new","vip"],"meta":{}}`,
  },
  {
    name: "unicode and emoji",
    secret: SECRET,
    t: T2,
    body:
      String.raw`{"name":"Zoë","city":"Zürich","emoji":"😀🎉👩‍💻","cjk":"漢字","rtl":"שלום",` +
      `"combining":"e\u0301","astral":"\u{1D11E}"}`,
  },
  {
    name: "string escapes",
    secret: SECRET,
    t: T2,
    body:
      String.raw`{"quote":"\"","backslash":"\\","newline":"\n","tab":"\t","cr":"\r","backspace":"\b","formfeed":"\f",` +
      String.raw`"nul":"\u0000","unit_separator":"\u001f","slash":"/","html":"<a href=\"x\">&amp;</a>",` +
      `"del":"\u007f","line_separator":"\u2028"}`,
  },
  {
    name: "numbers",
    secret: SECRET,
    t: T2,
    body: "[0,-1,2.5,0.1,1e+21,1e-7,-0.5,123456789012345680000,5e-324,1.7976931348623157e+308]",
  },
  {
    name: "integer-like keys come first, in numeric order",
    secret: SECRET,
    t: T2,
    body: String.raw`{"2":"two","10":"ten","b":"b","a":"a"}`,
  },
  {
    name: "mixed keys, numbers and unicode",
    secret: SECRET,
    t: T2,
    body: String.raw`{"1":true,"b":[1,2.5,1e+21,null],"a":"é 😀 \"\n"}`,
  },
  { name: "nested arrays", secret: SECRET, t: T2, body: String.raw`[[],[[]],[1,[2,[3,[4]]]],{"a":[{"b":[]}]}]` },
  { name: "empty object", secret: SECRET, t: T2, body: "{}" },
  { name: "empty array", secret: SECRET, t: T2, body: "[]" },
  { name: "top-level string", secret: SECRET, t: T2, body: String.raw`"just a string"` },
  { name: "top-level null", secret: SECRET, t: T2, body: "null" },
  { name: "top-level number", secret: SECRET, t: T2, body: "42" },
  { name: "non-ASCII secret", secret: "sécret-🔑-秘密", t: T2, body: String.raw`{"hello":"world"}` },
  { name: "secret longer than the HMAC block", secret: LONG_SECRET, t: T2, body: String.raw`{"hello":"world"}` },
  { name: "empty secret", secret: "", t: T2, body: String.raw`{"hello":"world"}` },
  { name: "timestamp zero", secret: SECRET, t: 0, body: "{}" },
].map(({ name, secret, t, body }) => {
  if (!isCanonical(body)) throw new Error(`${name}: body is not canonical JSON: ${body}`);
  const sig = sigFor(secret, t, body);
  const header = `t=${t},sig=${sig}`;
  const verdict = hyperVerify(secret, header, body, t);
  if (!verdict.accepted) {
    throw new Error(`${name}: createHyperVerify rejected ${header}: ${JSON.stringify(verdict.result)}`);
  }
  return { name, secret, body, timestamp_ms: t, sig, header, accepted_by_create_hyper_verify: true };
});

// ---------------------------------------------------------------------------------------
// rejected: both createHyperVerify and Rust refuse these.

const BODY = String.raw`{"amount":100}`;
const GOOD = sigFor(SECRET, T, BODY);
const flipLast = (hex) => hex.slice(0, -1) + (hex.endsWith("0") ? "1" : "0");
const rejected = [
  { name: "wrong secret", header: headerFor("not-the-secret", T, BODY), rust: "mismatch" },
  {
    name: "tampered body",
    header: `t=${T},sig=${GOOD}`,
    body: String.raw`{"amount":1000}`,
    rust: "mismatch",
  },
  { name: "tampered timestamp", header: `t=${T + 1},sig=${GOOD}`, rust: "mismatch" },
  { name: "last hex digit changed", header: `t=${T},sig=${flipLast(GOOD)}`, rust: "mismatch" },
  { name: "signature truncated to 62 hex digits", header: `t=${T},sig=${GOOD.slice(0, 62)}`, rust: "malformed" },
  { name: "empty signature", header: `t=${T},sig=`, rust: "malformed" },
  { name: "parts in the wrong order", header: `sig=${GOOD},t=${T}`, rust: "malformed" },
  { name: "semicolon instead of comma", header: `t=${T};sig=${GOOD}`, rust: "malformed" },
  { name: "timestamp only", header: `t=${T}`, rust: "malformed" },
  { name: "garbage", header: "garbage", rust: "malformed" },
  { name: "empty header", header: "", rust: "malformed" },
].map(({ name, header, body = BODY, rust }) => {
  const nowMs = T;
  const verdict = hyperVerify(SECRET, header, body, nowMs);
  if (verdict.accepted) throw new Error(`${name}: createHyperVerify accepted ${header}`);
  return {
    name,
    secret: SECRET,
    body,
    now_ms: nowMs,
    header,
    accepted_by_create_hyper_verify: false,
    create_hyper_verify: verdict.result,
    rust,
  };
});

// ---------------------------------------------------------------------------------------
// divergent: createHyperVerify and Rust disagree. Each must really disagree (asserted).

const HOUR = 60 * 60 * 1000;
const divergent = [
  {
    name: "stale: signed an hour before now",
    note: "hyper-connect 0.12.0 does not enforce its ttl: it looks the time up at input.signature[0], undefined once the header is parsed, so the age is NaN and never out of range; Rust refuses timestamps more than 5 minutes away",
    header: headerFor(SECRET, T, BODY),
    now_ms: T + HOUR,
    rust: "expired",
  },
  {
    name: "future: signed an hour after now",
    note: "hyper-connect 0.12.0 does not enforce its ttl; Rust refuses timestamps more than 5 minutes away, either way",
    header: headerFor(SECRET, T + HOUR, BODY),
    now_ms: T,
    rust: "expired",
  },
  {
    name: "uppercase hex",
    note: "createHyperVerify compares the hex strings as they are; Rust decodes the hex, so either case is accepted",
    header: `t=${T},sig=${GOOD.toUpperCase()}`,
    now_ms: T,
    rust: "ok",
  },
  {
    name: "non-canonical body, signed over its raw bytes",
    note: "createHyperVerify hashes JSON.stringify(JSON.parse(body)), not the bytes received; hookq only ever sends canonical JSON, so this never happens with hookq",
    body: String.raw`{"amount": 100}`,
    header: `t=${T},sig=${hmacHex(SECRET, `${T}.{"amount": 100}`)}`,
    now_ms: T,
    rust: "ok",
  },
  {
    name: "non-numeric timestamp",
    note: "createHyperVerify hashes whatever text follows t=; Rust requires decimal digits",
    header: `t=yesterday,sig=${hmacHex(SECRET, `yesterday.${BODY}`)}`,
    now_ms: T,
    rust: "malformed",
  },
  {
    name: "timestamp with leading zeros",
    note: "createHyperVerify hashes the t text as sent; Rust parses it as a number and hashes its plain decimal form",
    header: `t=0${T},sig=${hmacHex(SECRET, `0${T}.${BODY}`)}`,
    now_ms: T,
    rust: "mismatch",
  },
].map(({ name, note, header, body = BODY, now_ms, rust }) => {
  const verdict = hyperVerify(SECRET, header, body, now_ms);
  if (verdict.accepted === (rust === "ok")) {
    throw new Error(`${name}: createHyperVerify and the expected Rust verdict agree; not divergent`);
  }
  return {
    name,
    note,
    secret: SECRET,
    body,
    now_ms,
    header,
    accepted_by_create_hyper_verify: verdict.accepted,
    create_hyper_verify: verdict.result,
    rust,
  };
});

// ---------------------------------------------------------------------------------------

const out = {
  about:
    "X-HYPER-SIGNATURE test vectors, each verdict from createHyperVerify(secret, ttl) of npm hyper-connect. " +
    "Generated by make_vectors.js (see its header for how to regenerate and what each list means); do not edit by hand.",
  hyper_connect: hcVersion,
  create_hyper_verify_ttl: TTL,
  rust_tolerance_ms: TOLERANCE_MS,
  accepted,
  rejected,
  divergent,
};
const text = JSON.stringify(out, null, 2) + "\n";
const file = path.join(__dirname, "vectors.json");

if (process.argv.includes("--check")) {
  const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
  if (current !== text) {
    console.error(`${file} is out of date: run node ${path.relative(process.cwd(), __filename)}`);
    process.exit(1);
  }
  console.log(`${file} is up to date`);
} else {
  fs.writeFileSync(file, text);
  console.log(
    `wrote ${file}: ${accepted.length} accepted, ${rejected.length} rejected, ${divergent.length} divergent (hyper-connect ${hcVersion})`,
  );
}
