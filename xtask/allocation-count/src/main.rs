//! The allocation benchmark behind `cargo xtask bench allocations`: example-operator's
//! controller converges `--primaries` PrometheusRules on an in-process mock API server, on a
//! current-thread runtime, under dhat's counting allocator, and prints what the heap did as one
//! line of JSON.
//!
//! The mock serves the primaries (each already holding the finalizer, so the reconcile's one
//! write is its child's apply) as the operator asks for them, streamed (`sendInitialEvents`:
//! one event each, then the bookmark that ends the initial list) or listed, answers each apply
//! with the ConfigMap it was sent, and streams that ConfigMap into the children's watch, as the
//! API server would. The run ends once every
//! primary has been reconciled twice: for itself, and for its child arriving in the cache.
//! Everything goes through the real caches and controller; only the network is missing.
//!
//! Its own package, because dhat must be the global allocator (`cargo xtask` uses mimalloc)
//! and its dependencies are nobody else's.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use example_operator::{
    controller::{self, Context, FINALIZER},
    reconcile::Operator,
    settings::Settings,
};
use futures::{StreamExt, stream::BoxStream};
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::StreamBody;
use kube::{Client, client::Body};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// The namespace of every primary.
const NAMESPACE: &str = "bench";
/// How long the run may take before it is called stuck.
const TIMEOUT: Duration = Duration::from_secs(900);

type ResponseBody = StreamBody<BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// What the mock API server holds.
struct Mock {
    /// The list of primaries, serialized before counting starts.
    primaries: Bytes,
    /// The same as a streaming list's events, the bookmark that ends it included.
    primaries_streamed: Bytes,
    /// The children's watch, until the operator opens it.
    child_events: Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>,
    /// Where applied children go, as watch events.
    child_sender: mpsc::UnboundedSender<Bytes>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let primaries: usize = std::env::args()
        .skip_while(|arg| arg != "--primaries")
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(10_000);
    // Paused: timers (the webhooks' certificate retry, the registry's poll) fire as the run
    // goes idle rather than by the wall clock, so the count does not depend on the machine.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?;
    let mock = Arc::new(mock(primaries)?);
    let profiler = dhat::Profiler::builder().testing().build();
    let started = Instant::now();
    // Read while the controller and its caches still live, converged.
    let heap = runtime.block_on(converge(Arc::clone(&mock), primaries))?;
    let seconds = started.elapsed().as_secs_f64();
    let rss = operator_gen_runtime::telemetry::Reading::now().map_or(0, |r| r.resident_bytes);
    println!(
        "{}",
        json!({
            "primaries": primaries,
            "total_blocks": heap.total_blocks,
            "total_bytes": heap.total_bytes,
            "max_bytes": heap.max_bytes,
            "curr_bytes": heap.curr_bytes,
            "rss_bytes": rss,
            "seconds": seconds,
        })
    );
    drop(profiler);
    // The controller's tasks are still running; they end with the process.
    std::process::exit(0);
}

/// The mock's state for `n` primaries.
fn mock(n: usize) -> Result<Mock, serde_json::Error> {
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        let mut primary =
            serde_json::to_value(controller::sample(&format!("rule-{i}"), Some(NAMESPACE))?)?;
        primary["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
        primary["metadata"]["resourceVersion"] = json!("1");
        primary["metadata"]["finalizers"] = json!([FINALIZER]);
        items.push(primary);
    }
    let mut streamed = Vec::new();
    for item in &items {
        serde_json::to_writer(&mut streamed, &json!({"type": "ADDED", "object": item}))?;
        streamed.push(b'\n');
    }
    streamed.extend_from_slice(&initial_events_end(
        "monitoring.coreos.com/v1",
        "PrometheusRule",
    )?);
    let list = json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRuleList",
        "metadata": {"resourceVersion": "1"},
        "items": items,
    });
    let (child_sender, receiver) = mpsc::unbounded_channel();
    Ok(Mock {
        primaries: Bytes::from(serde_json::to_vec(&list)?),
        primaries_streamed: Bytes::from(streamed),
        child_events: Mutex::new(Some(receiver)),
        child_sender,
    })
}

/// The bookmark that ends a streaming list of `kind`, as one line of a watch.
fn initial_events_end(api_version: &str, kind: &str) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(&json!({"type": "BOOKMARK", "object": {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "resourceVersion": "1",
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }}))?;
    line.push(b'\n');
    Ok(line)
}

/// Runs the operator until every primary was reconciled for itself and for its child; the
/// heap then.
async fn converge(
    mock: Arc<Mock>,
    n: usize,
) -> Result<dhat::HeapStats, Box<dyn std::error::Error>> {
    let service = tower::service_fn(move |request: Request<Body>| {
        let mock = Arc::clone(&mock);
        async move { Ok::<_, Infallible>(answer(&mock, request).await) }
    });
    let client = Client::new(service, "default");
    let mut settings = Settings::defaults();
    settings.common.metrics_addr = "127.0.0.1:0".parse()?;
    settings.webhooks.addr = "127.0.0.1:0".parse()?;
    let ctx = Arc::new(Context::with_settings(client, settings));
    let contexts = controller::Contexts {
        primary: Arc::clone(&ctx),
    };
    let run = controller::run_with(contexts, Operator::default());
    let done = async {
        while ctx.metrics.reconciles() < 2 * n as u64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        result = run => Err(format!("the controller stopped early: {result:?}").into()),
        () = done => Ok(dhat::HeapStats::get()),
        () = tokio::time::sleep(TIMEOUT) => Err(format!(
            "only {} of {} reconciles in {TIMEOUT:?}",
            ctx.metrics.reconciles(),
            2 * n
        ).into()),
    }
}

/// The mock API server's answer to one request.
async fn answer(mock: &Mock, request: Request<Body>) -> Response<ResponseBody> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let query = parts.uri.query().unwrap_or_default();
    let watch = query.contains("watch=true");
    let streamed = watch && query.contains("sendInitialEvents=true");
    match parts.method {
        Method::GET if path.ends_with("/prometheusrules") && streamed => respond(
            StatusCode::OK,
            once(mock.primaries_streamed.clone()).chain(pending()).boxed(),
        ),
        Method::GET if path.ends_with("/prometheusrules") && watch => respond(StatusCode::OK, pending()),
        Method::GET if path.ends_with("/prometheusrules") => {
            respond(StatusCode::OK, once(mock.primaries.clone()))
        }
        Method::GET if path.ends_with("/configmaps") && watch => {
            let events = mock
                .child_events
                .lock()
                .map(|mut events| events.take())
                .unwrap_or_default();
            // A streaming list of no children yet: only the bookmark that ends it.
            let first = streamed
                .then(|| Bytes::from(initial_events_end("v1", "ConfigMap").unwrap_or_default()));
            match events {
                Some(events) => respond(
                    StatusCode::OK,
                    futures::stream::iter(first)
                        .chain(tokio_stream::wrappers::UnboundedReceiverStream::new(events))
                        .map(|event| Ok(Frame::data(event)))
                        .boxed(),
                ),
                None => respond(StatusCode::OK, pending()),
            }
        }
        Method::GET if path.ends_with("/configmaps") => respond(
            StatusCode::OK,
            once(Bytes::from_static(
                br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[]}"#,
            )),
        ),
        Method::PATCH if path.contains("/configmaps/") => {
            let Ok(sent) = body.collect_bytes().await else {
                return status(StatusCode::BAD_REQUEST);
            };
            if let Ok(mut child) = serde_json::from_slice::<Value>(&sent) {
                // A watch follows each event's resourceVersion, as the API server sets it.
                child["metadata"]["resourceVersion"] = json!("2");
                let mut event = serde_json::to_vec(&json!({"type": "ADDED", "object": child}))
                    .unwrap_or_default();
                event.push(b'\n');
                let _ = mock.child_sender.send(Bytes::from(event));
            }
            respond(StatusCode::OK, once(sent))
        }
        Method::POST => match body.collect_bytes().await {
            Ok(sent) => respond(StatusCode::CREATED, once(sent)),
            Err(_) => status(StatusCode::BAD_REQUEST),
        },
        _ => status(StatusCode::NOT_FOUND),
    }
}

fn respond(
    code: StatusCode,
    body: BoxStream<'static, Result<Frame<Bytes>, Infallible>>,
) -> Response<ResponseBody> {
    let mut response = Response::new(StreamBody::new(body));
    *response.status_mut() = code;
    response
}

/// A Kubernetes Status for `code`.
fn status(code: StatusCode) -> Response<ResponseBody> {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code.as_u16(), "reason": code.canonical_reason().unwrap_or_default(),
        "message": "not served by the mock",
    });
    respond(code, once(Bytes::from(body.to_string())))
}

fn once(bytes: Bytes) -> BoxStream<'static, Result<Frame<Bytes>, Infallible>> {
    futures::stream::once(async move { Ok(Frame::data(bytes)) }).boxed()
}

/// A watch that stays open and says nothing.
fn pending() -> BoxStream<'static, Result<Frame<Bytes>, Infallible>> {
    futures::stream::pending().boxed()
}
