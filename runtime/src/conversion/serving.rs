//! Serving conversions: reviews read and converted in turn, off the async workers, with the
//! answer streamed back as it is written.

use std::{
    io::{self, Write},
    sync::Arc,
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::header::CONTENT_TYPE,
    response::{IntoResponse as _, Response},
};
use tokio::{sync::mpsc, time::Instant};

use super::{Hub, review};
use crate::{
    allocator,
    metrics::Metrics,
    request_budget::{Bodies, Refused, Turns},
    webhook_server::{self, Outcome},
};

/// How many of the largest ConversionReviews may be arriving at once (`Bodies`). Each holds
/// its body while its objects are converted one at a time and streamed back; a whole body waits
/// for a turn weighed by its size (`Turns`).
pub const CONVERSIONS_AT_ONCE: usize = 2;

/// How long a conversion may take from its first byte to its answer's last: under the 30
/// seconds the API server waits for one, so that a replica gives up a request before the API
/// server does.
const CONVERSION_DEADLINE: Duration = Duration::from_secs(25);

/// How long the converter waits for the client to take a chunk of the answer before it gives
/// the answer, and its turn, up: the API server reads as fast as it is sent.
pub(crate) const ANSWER_STALL: Duration = Duration::from_secs(5);

/// The hook's name in `operator_webhook_requests_total`.
const HOOK: &str = "convert";

/// Conversions in turn: at most [`CONVERSIONS_AT_ONCE`], each of a body of at most
/// `max_bytes`, converted off the async workers.
#[derive(Clone)]
pub struct Conversions {
    bodies: Bodies,
    turns: Turns,
}

impl Conversions {
    /// Conversions of reviews of at most `max_bytes`, whose answers are counted in `metrics`
    /// from the start, at zero, and whose work takes turns from `turns`, shared with the other
    /// webhooks.
    pub(crate) fn new(max_bytes: usize, metrics: &Metrics, turns: Turns) -> Self {
        let outcomes = [Outcome::Converted, Outcome::Invalid, Outcome::Failed];
        webhook_server::expect_answers(metrics, HOOK, &outcomes);
        Self {
            bodies: Bodies::new(max_bytes, CONVERSIONS_AT_ONCE),
            turns,
        }
    }

    /// Reads the review (a larger one is refused with 413 before it is read whole), waits for
    /// a turn, and answers it as its objects are converted through `H`, all within
    /// `CONVERSION_DEADLINE` (25 s).
    pub async fn answer<H: Hub + 'static>(
        &self,
        metrics: Arc<Metrics>,
        request: Request,
    ) -> Response {
        let deadline = Instant::now() + CONVERSION_DEADLINE;
        let body = match self.bodies.read(request.into_body(), deadline).await {
            Ok(body) => body,
            Err(refused) => return refuse(&metrics, &refused),
        };
        // A conversion streams its answer: beyond its body, it holds one object at a time and
        // the answer's queue, so its work weighs about as much as its body.
        let turn = match self.turns.take(body.bytes.len(), deadline).await {
            Ok(turn) => turn,
            Err(refused) => return refuse(&metrics, &refused),
        };
        let (chunks, answer) = mpsc::channel::<io::Result<Bytes>>(4);
        let writer = Chunks {
            chunks,
            runtime: tokio::runtime::Handle::current(),
        };
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let mut out = io::BufWriter::with_capacity(64 * 1024, writer);
            let answered = review::<H>(&body.bytes, &mut out)
                .and_then(|outcome| out.flush().map(|()| outcome));
            match answered {
                Ok(outcome) => metrics.webhook_answered(HOOK, outcome.name()),
                Err(error) => {
                    metrics.webhook_answered(HOOK, Outcome::Failed.name());
                    tracing::warn!(%error, "a conversion answer was not sent whole");
                }
            }
            // A conversion's work weighs about its body (see the turn above).
            let took = body.bytes.len();
            drop(body);
            allocator::freed(took);
        });
        let answer = futures::stream::unfold(answer, |mut answer| async move {
            answer.recv().await.map(|chunk| (chunk, answer))
        });
        (
            [(CONTENT_TYPE, "application/json")],
            Body::from_stream(answer),
        )
            .into_response()
    }
}

/// The answer to a review refused before its conversion began, counted.
fn refuse(metrics: &Metrics, refused: &Refused) -> Response {
    let what = match refused {
        Refused::TooLarge(_) => "the ConversionReview was not converted (--conversion-max-bytes)",
        _ => "the ConversionReview was not converted",
    };
    refused.answer(metrics, HOOK, what)
}

/// The answer of a conversion, sent in chunks to the connection as it is written; a chunk the
/// connection does not take within [`ANSWER_STALL`] ends the answer.
struct Chunks {
    chunks: mpsc::Sender<io::Result<Bytes>>,
    runtime: tokio::runtime::Handle,
}

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let chunk = Ok(Bytes::copy_from_slice(buf));
        let sent = self
            .runtime
            .block_on(tokio::time::timeout(ANSWER_STALL, self.chunks.send(chunk)));
        match sent {
            Ok(Ok(())) => Ok(buf.len()),
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client stopped reading the answer",
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no part of the answer for {ANSWER_STALL:?}"),
            )),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        conversion::{round_trips::recorded, tests::Hub2},
        metrics::ReadyWhen,
        request_budget::WORK_BYTES,
    };
    use axum::http::StatusCode;

    fn post(body: Vec<u8>) -> Request {
        axum::http::Request::post("/convert")
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .expect("a request")
    }

    /// A ConversionReview of `count` objects already in the hub's version, which pass through
    /// as they are: what is checked here is how the answer travels, not the conversion.
    fn review_of(count: usize) -> Vec<u8> {
        let objects: Vec<Value> = (0..count)
            .map(|i| json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": format!("widget-{i}")}}))
            .collect();
        recorded("example.com/v2", objects)
    }

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 0 }))
    }

    #[tokio::test]
    async fn a_review_over_the_cap_is_refused_and_not_converted() {
        let body = review_of(100);
        let metrics = metrics();
        let turns = Turns::new(WORK_BYTES, Arc::clone(&metrics));
        let conversions = Conversions::new(body.len() - 1, &metrics, turns);
        let response = conversions.answer::<Hub2>(metrics, post(body)).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let text = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        let text = text.expect("a body");
        assert!(String::from_utf8_lossy(&text).contains("--conversion-max-bytes"));
    }

    #[tokio::test]
    async fn a_streamed_answer_is_the_whole_answer_in_chunks() {
        // Far more than one chunk of the answer.
        let body = review_of(5_000);
        let mut whole = Vec::new();
        review::<Hub2>(&body, &mut whole).expect("answered in memory");
        assert!(whole.len() > 64 * 1024, "the answer spans several chunks");
        let metrics = metrics();
        let turns = Turns::new(WORK_BYTES, Arc::clone(&metrics));
        let conversions = Conversions::new(body.len(), &metrics, turns);
        let response = conversions.answer::<Hub2>(metrics, post(body)).await;
        assert_eq!(response.status(), StatusCode::OK);
        let streamed = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        let streamed = streamed.expect("a body");
        assert_eq!(streamed.as_ref(), whole.as_slice());
        let answer: kube::core::conversion::ConversionReview =
            serde_json::from_slice(&streamed).expect("a review");
        let converted = answer.response.expect("a response").converted_objects;
        assert_eq!(converted.len(), 5_000);
    }
}
