-- hookq schema v13: the W3C Trace Context a job belongs to (the `traceparent` and
-- `tracestate` its enqueue carried, or its enqueue span's when hookq exports traces). Each
-- delivery attempt continues that trace and sends the worker its own `traceparent`.
-- NULL: the job belongs to no trace.
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
ALTER TABLE jobs ADD COLUMN tracestate TEXT;
