//! Traces: with the `otlp` feature built in and `OTEL_EXPORTER_OTLP_ENDPOINT` set (a gRPC
//! endpoint such as `http://otel-collector:4317`), spans go out over OTLP.
//!
//! kube's controller already opens one span per reconcile, `reconciling object`, with the
//! object's reference and why it is reconciled; exported, that is the reconcile's trace.
//! [`traced`] opens a `reconcile` span inside it that carries the trace id as a field, so the
//! log lines a reconcile writes name the trace to look up. Without the feature, or without the
//! variable, nothing is exported and [`traced`] costs nothing.
//!
//! The service name is `OTEL_SERVICE_NAME`, or else the executable's name (the operator's).

use std::future::Future;

use std::sync::Arc;

use kube::Resource;
use tracing::{Span, instrument::Instrumented};

/// Runs the future of a reconcile of `obj` inside a `reconcile` span that records its trace
/// id, when spans are exported.
///
/// When it ends, it logs `reconcile ended` at debug level under this module's target, with
/// the object's name and namespace and how long it took (`took_us`): with
/// `RUST_LOG=operator_gen_runtime::traces=debug`, each reconcile's interval can be read from
/// the log lines, as `cargo xtask e2e` does to prove that no two sharded replicas reconcile an
/// object at once. Otherwise the line costs a level check.
pub fn traced<K: Resource, F: Future>(
    obj: Arc<K>,
    future: F,
) -> Instrumented<impl Future<Output = F::Output>> {
    let timed = async move {
        let started = std::time::Instant::now();
        let output = future.await;
        let meta = obj.meta();
        tracing::debug!(
            name = meta.name.as_deref(),
            namespace = meta.namespace.as_deref(),
            took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "reconcile ended"
        );
        output
    };
    tracing::Instrument::instrument(timed, reconcile_span())
}

#[cfg(not(feature = "otlp"))]
fn reconcile_span() -> Span {
    Span::none()
}

#[cfg(feature = "otlp")]
fn reconcile_span() -> Span {
    if !otlp::EXPORTING.load(std::sync::atomic::Ordering::Relaxed) {
        return Span::none();
    }
    let span = tracing::info_span!("reconcile", trace_id = tracing::field::Empty);
    otlp::record_trace_id(&span);
    span
}

#[cfg(feature = "otlp")]
pub use otlp::{Exporter, from_env};

#[cfg(feature = "otlp")]
mod otlp {
    use std::sync::atomic::{AtomicBool, Ordering};

    use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
    use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
    use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    use tracing_subscriber::{Layer, registry::LookupSpan};

    /// Whether spans are exported, so [`super::traced`] opens its span only then.
    pub(super) static EXPORTING: AtomicBool = AtomicBool::new(false);

    /// The endpoint variable, as every OpenTelemetry SDK reads it.
    const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

    /// Spans exported in batches to an OTLP endpoint; flushed when dropped.
    pub struct Exporter {
        provider: SdkTracerProvider,
    }

    impl Exporter {
        /// An exporter to the gRPC `endpoint`, naming the service `service`.
        pub fn new(
            endpoint: &str,
            service: &str,
        ) -> Result<Self, opentelemetry_otlp::ExporterBuildError> {
            let exporter = SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()?;
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(
                    Resource::builder()
                        .with_service_name(service.to_owned())
                        .build(),
                )
                .build();
            Ok(Self { provider })
        }

        /// The tracing layer that hands spans to this exporter.
        pub fn layer<S>(&self) -> impl Layer<S> + use<S>
        where
            S: tracing::Subscriber + for<'span> LookupSpan<'span>,
        {
            EXPORTING.store(true, Ordering::Relaxed);
            tracing_opentelemetry::layer().with_tracer(self.provider.tracer("operator-gen-runtime"))
        }

        /// Sends every span ended so far.
        pub fn flush(&self) {
            if let Err(error) = self.provider.force_flush() {
                tracing::warn!(%error, "could not send the last spans");
            }
        }
    }

    impl Drop for Exporter {
        fn drop(&mut self) {
            EXPORTING.store(false, Ordering::Relaxed);
            let _ = self.provider.shutdown();
        }
    }

    /// The exporter `OTEL_EXPORTER_OTLP_ENDPOINT` asks for: none when it is unset or empty,
    /// and an error, for the log, when it cannot be built.
    pub fn from_env() -> Option<Result<Exporter, opentelemetry_otlp::ExporterBuildError>> {
        let endpoint = std::env::var(ENDPOINT).ok().filter(|e| !e.is_empty())?;
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(executable_name)
            .unwrap_or_else(|| "operator".to_owned());
        Some(Exporter::new(&endpoint, &service))
    }

    fn executable_name() -> Option<String> {
        let exe = std::env::current_exe().ok()?;
        Some(exe.file_name()?.to_string_lossy().into_owned())
    }

    /// Records the trace `span` belongs to as its `trace_id` field.
    pub(super) fn record_trace_id(span: &Span) {
        let trace_id = span.context().span().span_context().trace_id();
        span.record("trace_id", tracing::field::display(trace_id));
    }
}

#[cfg(test)]
mod interval_tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[tokio::test]
    async fn a_reconcile_logs_its_end_and_duration_at_debug_naming_the_object() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&lines);
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || Sink(Arc::clone(&writer)))
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let mut map = ConfigMap::default();
        map.metadata.name = Some("rules-a".into());
        map.metadata.namespace = Some("apps".into());
        let answer = traced(Arc::new(map), async {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            7
        })
        .await;
        assert_eq!(answer, 7, "the reconcile's own output");
        let text = String::from_utf8(lines.lock().expect("lines").clone()).expect("utf-8");
        let line: serde_json::Value =
            serde_json::from_str(text.lines().next().expect("one line")).expect("JSON");
        let fields = &line["fields"];
        assert_eq!(fields["message"], "reconcile ended");
        assert_eq!(fields["name"], "rules-a");
        assert_eq!(fields["namespace"], "apps");
        let took = fields["took_us"].as_u64().expect("a duration");
        assert!(took >= 20_000, "took {took} µs");
        assert_eq!(line["target"], "operator_gen_runtime::traces");
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(all(test, feature = "otlp"))]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
        time::Duration,
    };

    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    };
    use tokio::sync::mpsc;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// An OTLP receiver that hands every export to a channel.
    struct Receiver(mpsc::UnboundedSender<ExportTraceServiceRequest>);

    #[tonic::async_trait]
    impl TraceService for Receiver {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            let _ = self.0.send(request.into_inner());
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        }
    }

    /// Log lines written, for the assertions.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reconcile_is_exported_as_a_span_and_its_logs_name_the_trace() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let addr = listener.local_addr().expect("an address");
        let (exports, mut received) = mpsc::unbounded_channel();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(Receiver(exports)))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let exporter = Exporter::new(&format!("http://{addr}"), "widget-operator").expect("built");
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry().with(exporter.layer()).with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(move || writer.clone()),
        );
        {
            let _default = tracing::subscriber::set_default(subscriber);
            // As kube's controller opens it around each reconcile.
            let outer = tracing::info_span!(
                "reconciling object",
                "object.ref" = "Widget.v1.example.com/a.ns"
            );
            let reconcile = outer.in_scope(|| {
                traced(
                    Arc::new(k8s_openapi::api::core::v1::ConfigMap::default()),
                    async {
                        tracing::info!("applied the child");
                    },
                )
            });
            tracing::Instrument::instrument(reconcile, outer).await;
        }
        tokio::task::spawn_blocking(move || exporter.flush())
            .await
            .expect("flushed");

        let export = tokio::time::timeout(Duration::from_secs(10), received.recv())
            .await
            .expect("an export within the timeout")
            .expect("an export");
        let spans: Vec<_> = export
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .collect();
        let outer = spans
            .iter()
            .find(|s| s.name == "reconciling object")
            .expect("the reconcile's span is exported");
        assert!(
            outer.attributes.iter().any(|a| a.key == "object.ref"
                && format!("{:?}", a.value).contains("Widget.v1.example.com/a.ns")),
            "{:?}",
            outer.attributes
        );
        let service = format!("{:?}", export.resource_spans[0].resource);
        assert!(service.contains("widget-operator"), "{service}");

        let trace_id: String = outer.trace_id.iter().map(|b| format!("{b:02x}")).collect();
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        let line = text
            .lines()
            .find(|l| l.contains("applied the child"))
            .expect("the reconcile's log line");
        assert!(
            line.contains(&format!("\"trace_id\":\"{trace_id}\"")),
            "{line} should name the trace {trace_id}"
        );
    }
}
