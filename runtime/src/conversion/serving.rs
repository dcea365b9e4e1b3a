//! Serving conversions: reviews read and converted in turn, off the async workers, with the
//! answer streamed back as it is written.

use std::{
    io::{self, Write},
    sync::Arc,
};

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse as _, Response},
};
use tokio::sync::{Semaphore, mpsc};

use super::{Hub, review};
use crate::{
    metrics::Metrics,
    webhook_server::{self, Outcome},
};

/// How many ConversionReviews are read and converted at once. Each holds its body while its
/// objects are converted one at a time and streamed back; more reviews wait for a turn before
/// their bodies are read, so that the webhooks hold at most this many bodies however many the
/// API server sends.
pub const CONVERSIONS_AT_ONCE: usize = 2;

/// The hook's name in `operator_webhook_requests_total`.
const HOOK: &str = "convert";

/// Conversions in turn: at most [`CONVERSIONS_AT_ONCE`], each of a body of at most
/// `max_bytes`, converted off the async workers.
#[derive(Clone)]
pub struct Conversions {
    turns: Arc<Semaphore>,
    max_bytes: usize,
}

impl Conversions {
    /// Conversions of reviews of at most `max_bytes`, whose answers are counted in `metrics`
    /// from the start, at zero.
    pub fn new(max_bytes: usize, metrics: &Metrics) -> Self {
        let outcomes = [Outcome::Converted, Outcome::Invalid, Outcome::Failed];
        webhook_server::expect_answers(metrics, HOOK, &outcomes);
        Self {
            turns: Arc::new(Semaphore::new(CONVERSIONS_AT_ONCE)),
            max_bytes,
        }
    }

    /// Waits for a turn, reads the review (a larger one is refused with 413 before it is read
    /// whole), and answers it as its objects are converted through `H`.
    pub async fn answer<H: Hub + 'static>(
        &self,
        metrics: Arc<Metrics>,
        request: Request,
    ) -> Response {
        let Ok(turn) = Arc::clone(&self.turns).acquire_owned().await else {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        let body = match axum::body::to_bytes(request.into_body(), self.max_bytes).await {
            Ok(body) => body,
            Err(error) => {
                metrics.webhook_answered(HOOK, Outcome::Invalid.name());
                let reason = format!(
                    "the ConversionReview was not read whole, at most {} bytes are \
                     (--conversion-max-bytes): {error}",
                    self.max_bytes
                );
                tracing::warn!(%reason);
                return (StatusCode::PAYLOAD_TOO_LARGE, reason).into_response();
            }
        };
        let (chunks, answer) = mpsc::channel::<io::Result<Bytes>>(4);
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let mut out = io::BufWriter::with_capacity(64 * 1024, Chunks(chunks));
            let answered =
                review::<H>(&body, &mut out).and_then(|outcome| out.flush().map(|()| outcome));
            match answered {
                Ok(outcome) => metrics.webhook_answered(HOOK, outcome.name()),
                Err(error) => tracing::warn!(%error, "a conversion answer was not sent whole"),
            }
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

/// The answer of a conversion, sent in chunks to the connection as it is written.
struct Chunks(mpsc::Sender<io::Result<Bytes>>);

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let chunk = Ok(Bytes::copy_from_slice(buf));
        self.0.blocking_send(chunk).map_err(|_| {
            let reason = "the API server stopped reading the answer";
            io::Error::new(io::ErrorKind::BrokenPipe, reason)
        })?;
        Ok(buf.len())
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
    };

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
        let conversions = Conversions::new(body.len() - 1, &metrics);
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
        let conversions = Conversions::new(body.len(), &metrics);
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
