//! Reading a ConversionReview and writing its answer an object at a time.

use std::io::{self, Write};

use kube::core::response::Status;
use serde::{
    Deserialize, Deserializer,
    de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::Value;

use crate::webhook_server::{Outcome, request_uid};

/// What the first read of a review keeps: its request's uid and desired version. The
/// objects are only counted, which checks that they are a list without keeping any.
#[derive(Deserialize)]
pub(super) struct Head {
    pub request: Option<RequestHead>,
}

#[derive(Deserialize)]
pub(super) struct RequestHead {
    pub uid: String,
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    #[serde(rename = "objects")]
    _objects: List,
}

/// A list whose items are read as JSON and skipped.
struct List;

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Skipping;
        impl<'de> Visitor<'de> for Skipping {
            type Value = List;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(List)
            }
        }
        deserializer.deserialize_seq(Skipping)
    }
}

/// Calls `visit` with each of `request.objects` in `body`, in order, one at a time.
pub(super) fn each_object(body: &[u8], mut visit: impl FnMut(Value)) -> serde_json::Result<()> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    Fields {
        path: &["request", "objects"],
        visit: &mut visit,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()
}

/// Walks down the fields named by `path`, skipping every other, then visits the list there.
struct Fields<'p, 'v> {
    path: &'p [&'static str],
    visit: &'v mut dyn FnMut(Value),
}

impl<'de> DeserializeSeed<'de> for Fields<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.path.is_empty() {
            deserializer.deserialize_seq(self)
        } else {
            deserializer.deserialize_map(self)
        }
    }
}

impl<'de> Visitor<'de> for Fields<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ConversionReview")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Fields { path, visit } = self;
        while let Some(key) = map.next_key::<String>()? {
            if key == path[0] {
                map.next_value_seed(Fields {
                    path: &path[1..],
                    visit: &mut *visit,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(object) = seq.next_element::<Value>()? {
            (self.visit)(object);
        }
        Ok(())
    }
}

/// A ConversionReview answer being written: the converted objects as they come, then the
/// result. After the first failure, objects are no longer converted or written.
pub(super) struct Answer<'w, W: Write> {
    out: &'w mut W,
    written: usize,
    failure: Option<String>,
    /// The first error of `out`, returned by [`Answer::finish`].
    broken: Option<io::Error>,
}

impl<'w, W: Write> Answer<'w, W> {
    /// Writes the head of the answer to the request `uid`.
    pub fn start(out: &'w mut W, uid: &str) -> io::Result<Self> {
        out.write_all(br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"#)?;
        serde_json::to_writer(&mut *out, uid)?;
        out.write_all(br#","convertedObjects":["#)?;
        Ok(Self {
            out,
            written: 0,
            failure: None,
            broken: None,
        })
    }

    /// Writes one converted object, or records why it could not be converted.
    pub fn push(&mut self, converted: Result<Value, String>) {
        if self.failure.is_some() || self.broken.is_some() {
            return;
        }
        let object = match converted {
            Ok(object) => object,
            Err(reason) => return self.fail(reason),
        };
        let separator: &[u8] = if self.written == 0 { b"" } else { b"," };
        let written = self
            .out
            .write_all(separator)
            .and_then(|()| serde_json::to_writer(&mut *self.out, &object).map_err(io::Error::from));
        match written {
            Ok(()) => self.written += 1,
            Err(error) => self.broken = Some(error),
        }
    }

    /// Fails the review for `reason`, unless it failed already.
    pub fn fail(&mut self, reason: String) {
        self.failure.get_or_insert(reason);
    }

    /// Writes the result and says how the review was answered.
    pub fn finish(self) -> io::Result<Outcome> {
        if let Some(error) = self.broken {
            return Err(error);
        }
        let (status, outcome) = match self.failure {
            None => (Status::success(), Outcome::Converted),
            Some(reason) => (Status::failure(&reason, "Invalid"), Outcome::Failed),
        };
        self.out.write_all(br#"],"result":"#)?;
        serde_json::to_writer(&mut *self.out, &status)?;
        self.out.write_all(b"}}")?;
        Ok(outcome)
    }
}

/// Answers a body that is no ConversionReview with a failure for its request's uid, if it
/// has one: the API server accepts an answer only for its own request.
pub(super) fn refuse(out: &mut impl Write, body: &[u8], reason: &str) -> io::Result<Outcome> {
    let uid = request_uid(body).unwrap_or_default();
    let mut answer = Answer::start(out, &uid)?;
    answer.fail(reason.to_owned());
    answer.finish().map(|_| Outcome::Invalid)
}
