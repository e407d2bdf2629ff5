//! OpenTelemetry traces: the spans of a job's life (its enqueue, the claim that leased it,
//! each delivery attempt) exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, in the producer's trace when the enqueue
//! carried a W3C `traceparent`.
//!
//! Off (no endpoint, or `OTEL_SDK_DISABLED=true`), nothing here creates a span: each
//! helper returns at its first line, and a producer's `traceparent` is only stored and
//! passed on to the worker unchanged. The exporter's settings are the standard
//! `OTEL_*` variables, read by the `opentelemetry-otlp` crate (`OTEL_EXPORTER_OTLP_PROTOCOL`
//! `http/protobuf` by default or `http/json`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_BSP_SCHEDULE_DELAY`, …); `OTEL_SERVICE_NAME` names the service (`hookq` by default).

use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::model::{JobId, QueueName, TopicName};
use crate::store::ClaimedJob;
use crate::trace_context::TraceContext;

/// The `tracing` target of hookq's exported spans: the exporter's layer takes these only.
pub const TARGET: &str = "hookq::otel";

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Whether spans are exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The layer that exports hookq's spans, when the environment asks for an exporter;
/// `None` otherwise. Call once, before the subscriber is installed.
pub fn layer_from_env<S>() -> anyhow::Result<Option<impl Layer<S>>>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    if !configured || disabled {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("cannot set up the OTLP exporter (OTEL_EXPORTER_OTLP_*)")?;
    let resource = if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        Resource::builder().build()
    } else {
        Resource::builder().with_service_name("hookq").build()
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("hookq");
    let _ = PROVIDER.set(provider);
    ENABLED.store(true, Ordering::Relaxed);
    let only_ours =
        tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE);
    Ok(Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(only_ours),
    ))
}

/// Export the spans still buffered (at shutdown).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.shutdown()
    {
        tracing::warn!(%error, "OpenTelemetry: spans not exported at shutdown");
    }
}

/// The span of a publish to `topic` (its messages `ids`), a child of the producer's trace;
/// every subscriber's job continues it, so each attempt is a child of the publish. Returns
/// the span and the context the jobs store (as [`enqueue`]).
pub fn publish(
    topic: &TopicName,
    ids: &[JobId],
    producer: Option<TraceContext>,
) -> (Option<Span>, Option<TraceContext>) {
    if !enabled() {
        return (None, producer);
    }
    let span = tracing::info_span!(
        target: TARGET,
        "hookq.publish",
        otel.kind = "producer",
        hookq.topic = %topic,
        hookq.message_id = tracing::field::Empty,
        hookq.messages = ids.len(),
    );
    if let [id] = ids {
        span.record("hookq.message_id", tracing::field::display(id));
    }
    under_producer(span, producer)
}

/// The span of one enqueue (of one job, or a batch), a child of the producer's context
/// when it sent one, and the context its jobs are stored with: the span's (their attempts
/// are its children), or without export the producer's as it came.
pub fn enqueue(
    queue: &QueueName,
    ids: &[JobId],
    producer: Option<TraceContext>,
) -> (Option<Span>, Option<TraceContext>) {
    if !enabled() {
        return (None, producer);
    }
    let span = tracing::info_span!(
        target: TARGET,
        "hookq.enqueue",
        otel.kind = "producer",
        hookq.queue = %queue,
        hookq.job_id = tracing::field::Empty,
        hookq.jobs = ids.len(),
    );
    if let [id] = ids {
        span.record("hookq.job_id", tracing::field::display(id));
    }
    under_producer(span, producer)
}

/// A producer-side span (an enqueue's, a publish's) made a child of the producer's context
/// when it sent one, and the context its jobs are stored with: the span's, carrying the
/// producer's `tracestate`, or the producer's as it came when the span has none.
fn under_producer(
    span: Span,
    producer: Option<TraceContext>,
) -> (Option<Span>, Option<TraceContext>) {
    let state = producer.as_ref().and_then(|p| p.state.clone());
    if let Some(parent) = &producer {
        let _ = span.set_parent(context_of(parent));
    }
    let stored = context_of_span(&span, state).or(producer);
    (Some(span), stored)
}

/// The span of one claim of `queue`'s jobs, linked to each job's trace.
pub fn claim(queue: &QueueName) -> Option<Span> {
    enabled().then(|| {
        tracing::info_span!(
            target: TARGET,
            "hookq.claim",
            hookq.queue = %queue,
            hookq.jobs = tracing::field::Empty,
        )
    })
}

/// Record what `span` (from [`claim`]) claimed.
pub fn claimed(span: Option<&Span>, jobs: &[ClaimedJob]) {
    let Some(span) = span else {
        return;
    };
    span.record("hookq.jobs", jobs.len());
    for job in jobs {
        if let Some(trace) = &job.trace {
            span.add_link(span_context(trace));
        }
    }
}

/// The span of one delivery attempt (a child of the job's stored context) and the context
/// to send the worker: the span's, or without export the job's as stored.
pub fn attempt(queue: &QueueName, job: &ClaimedJob) -> (Option<Span>, Option<TraceContext>) {
    if !enabled() {
        return (None, job.trace.clone());
    }
    let span = tracing::info_span!(
        target: TARGET,
        "hookq.attempt",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        hookq.queue = %queue,
        hookq.job_id = %job.id,
        hookq.attempt = job.attempt,
        http.response.status_code = tracing::field::Empty,
        hookq.latency_ms = tracing::field::Empty,
        error.message = tracing::field::Empty,
    );
    if let Some(parent) = &job.trace {
        let _ = span.set_parent(context_of(parent));
    }
    let state = job.trace.as_ref().and_then(|t| t.state.clone());
    let sent = context_of_span(&span, state).or_else(|| job.trace.clone());
    (Some(span), sent)
}

/// Record an attempt's answer on its span (from [`attempt`]).
pub fn attempted(span: Option<&Span>, status: Option<u16>, latency_ms: u64, error: Option<&str>) {
    let Some(span) = span else {
        return;
    };
    if let Some(status) = status {
        span.record("http.response.status_code", status);
    }
    span.record("hookq.latency_ms", latency_ms);
    match error {
        Some(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.message", first_chars(error, MAX_ERROR_CHARS));
        }
        None => {
            span.record("otel.status_code", "OK");
        }
    }
}

/// How much of a worker's answer an attempt's span keeps (the dead letter keeps it all).
const MAX_ERROR_CHARS: usize = 512;

fn first_chars(text: &str, n: usize) -> &str {
    text.char_indices()
        .nth(n)
        .map_or(text, |(at, _)| &text[..at])
}

fn span_context(trace: &TraceContext) -> SpanContext {
    let state = trace
        .state
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    SpanContext::new(
        TraceId::from_bytes(trace.trace_id),
        SpanId::from_bytes(trace.parent_id),
        TraceFlags::new(trace.flags),
        true,
        state,
    )
}

fn context_of(trace: &TraceContext) -> opentelemetry::Context {
    opentelemetry::Context::new().with_remote_span_context(span_context(trace))
}

/// `span`'s own position in its trace, with `state` passed on.
fn context_of_span(span: &Span, state: Option<String>) -> Option<TraceContext> {
    let cx = span.context();
    let otel_span = cx.span();
    let context = otel_span.span_context();
    context.is_valid().then(|| TraceContext {
        trace_id: context.trace_id().to_bytes(),
        parent_id: context.span_id().to_bytes(),
        flags: context.trace_flags().to_u8(),
        state,
    })
}
