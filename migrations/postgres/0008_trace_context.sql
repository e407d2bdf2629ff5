-- The W3C Trace Context a job belongs to, as on SQLite (migrations/0013_trace_context.sql).
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
ALTER TABLE jobs ADD COLUMN tracestate TEXT;
