//! What answering a review takes in memory, counted in one pass over its JSON before anything
//! is decoded.
//!
//! Bytes alone do not say it: a review's objects are decoded into the primary's type, and a
//! mutation's are serialized twice more (before and after the hook) into JSON values to diff,
//! where each JSON object costs a map's allocation whatever its size. So 7.2 MiB of minimal
//! rules (`{"expr":"1"}`, 580,000 objects) took a replica from 25 to 967 MiB in `mutate`,
//! about 130 bytes per byte of body, where a review of ordinary rules takes about 14.
//! Counting objects, arrays and values first weighs both right, and a review whose work is
//! more than one replica can spend is refused before it is decoded.

use super::Hook;

/// The memory a review's work takes, as a multiple of its body: its object and the old one
/// decoded into their type (about six times their JSON each, for an object of many small
/// fields). Measured with `webhook-server-peak admission` (README).
const PER_BODY_BYTE: usize = 14;

/// What decoding adds per JSON object into a type: a struct of optional fields, each object
/// at least the size of its type. Measured with `webhook-server-peak validate-minimal`:
/// 124 MiB for 7.5 MB of 580,000 minimal rules, of which the bytes account for 100.
const PER_OBJECT: usize = 64;

/// What a mutation adds per JSON object, array and other value: two JSON values of the
/// object as typed, before and after the hook, and the patch between them. A JSON object is a
/// map whose first entry allocates a whole node. Measured with `webhook-server-peak
/// mutate-minimal`: 936 MiB for the 580,000 minimal rules above, about 1.6 KiB each.
const MUTATION_PER_OBJECT: usize = 1536;
const MUTATION_PER_ARRAY: usize = 64;
const MUTATION_PER_VALUE: usize = 96;

/// The most one review's work may take: with the bodies' budget, the rest of the operator and
/// the allocator's slack, one review this large alone stays under the generated Deployment's
/// 256 MiB limit. The largest reviews the API server sends (a 1.5 MiB object and the old one)
/// of ordinary rules weigh about 60 MiB.
pub(super) const MAX_REVIEW_WORK: usize = 160 * 1024 * 1024;

/// How many JSON objects, arrays and other values a review holds, and how many of them are
/// its old object's, which a mutation does not serialize again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Shape {
    pub objects: usize,
    pub arrays: usize,
    pub values: usize,
    /// Of the objects, those of `request.oldObject`.
    pub old_objects: usize,
    pub old_values: usize,
}

impl Shape {
    /// Counts `body`'s objects, arrays and values in one pass, without decoding it. Strings
    /// are skipped (what they hold counts as one value), so text cannot add to the count.
    pub(super) fn of(body: &[u8]) -> Self {
        let mut shape = Self::default();
        let mut scan = Scan::default();
        for &byte in body {
            if scan.in_string {
                scan.string_byte(byte);
                continue;
            }
            match byte {
                b'"' => {
                    scan.open_string();
                    let old = scan.in_old_object();
                    shape.start_value(&mut scan.value_started, old);
                }
                b'{' | b'[' => {
                    let old = scan.in_old_object();
                    if byte == b'{' {
                        shape.objects += 1;
                        shape.old_objects += usize::from(old);
                    } else {
                        shape.arrays += 1;
                    }
                    scan.depth += 1;
                    scan.value_started = false;
                    scan.expect_key = byte == b'{';
                }
                b'}' | b']' => {
                    scan.depth = scan.depth.saturating_sub(1);
                    scan.value_started = false;
                    if scan.depth < 2 {
                        scan.member_is_old = false;
                    }
                }
                b',' => {
                    scan.value_started = false;
                    scan.expect_key = true;
                }
                b':' => {
                    scan.value_started = false;
                    scan.expect_key = false;
                }
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ => {
                    let old = scan.in_old_object();
                    shape.start_value(&mut scan.value_started, old);
                }
            }
        }
        shape
    }

    /// Counts a scalar once, however many bytes it has.
    fn start_value(&mut self, started: &mut bool, old: bool) {
        if !*started {
            self.values += 1;
            self.old_values += usize::from(old);
            *started = true;
        }
    }

    /// The memory `hook`'s work on a review of `bytes` of this shape takes.
    pub(super) fn work(&self, hook: Hook, bytes: usize) -> usize {
        let decoded = bytes
            .saturating_mul(PER_BODY_BYTE)
            .saturating_add(self.objects.saturating_mul(PER_OBJECT));
        match hook {
            Hook::Validate => decoded,
            // The old object is dropped before the hook; its arrays are counted, at little.
            Hook::Mutate => decoded
                .saturating_add(
                    (self.objects - self.old_objects).saturating_mul(MUTATION_PER_OBJECT),
                )
                .saturating_add(self.arrays.saturating_mul(MUTATION_PER_ARRAY))
                .saturating_add((self.values - self.old_values).saturating_mul(MUTATION_PER_VALUE)),
        }
    }
}

/// Where [`Shape::of`] is in a review: in a string or not, how deep, and whether in the
/// member `request.oldObject`, which it finds by reading the keys two levels down.
#[derive(Default)]
struct Scan {
    in_string: bool,
    escaped: bool,
    value_started: bool,
    depth: usize,
    /// Whether the next string is a key.
    expect_key: bool,
    /// The key being read two levels down, up to the length of `oldObject`.
    key: Option<Vec<u8>>,
    member_is_old: bool,
}

const OLD_OBJECT: &[u8] = b"oldObject";

impl Scan {
    /// Whether what starts here is part of `request.oldObject`: its value, or inside it.
    fn in_old_object(&self) -> bool {
        self.member_is_old && self.depth >= 2
    }

    fn open_string(&mut self) {
        self.in_string = true;
        if self.depth == 2 && self.expect_key {
            self.key = Some(Vec::new());
            self.member_is_old = false;
        }
    }

    fn string_byte(&mut self, byte: u8) {
        match (self.escaped, byte) {
            (true, _) => self.escaped = false,
            (false, b'\\') => self.escaped = true,
            (false, b'"') => {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.member_is_old = key == OLD_OBJECT;
                }
                return;
            }
            _ => {}
        }
        if let Some(key) = &mut self.key
            && key.len() <= OLD_OBJECT.len()
        {
            key.push(byte);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_counted_by_its_objects_arrays_and_values_and_not_by_its_text() {
        let body = br#"{"a": [1, 2.5, true, null], "b": {"c": "x{[,\"]}"}, "d": []}"#;
        assert_eq!(
            Shape::of(body),
            Shape {
                objects: 2,
                arrays: 2,
                // Keys are values too: each costs a string.
                values: 9,
                ..Shape::default()
            }
        );
    }

    #[test]
    fn the_old_object_of_a_review_is_counted_apart() {
        let body = br#"{"request": {"uid": "u", "object": {"a": {}}, "oldObject": {"a": {}, "b": 1}, "x": {}}}"#;
        let shape = Shape::of(body);
        assert_eq!((shape.objects, shape.old_objects), (7, 2), "{shape:?}");
        assert_eq!(shape.old_values, 3, "{shape:?}");
    }

    #[test]
    fn minimal_rules_weigh_ten_times_more_in_a_mutation_than_their_bytes_say() {
        let rules = vec![r#"{"expr":"1"}"#; 580_000].join(",");
        let body = format!(r#"{{"request":{{"object":{{"spec":{{"rules":[{rules}]}}}}}}}}"#);
        let shape = Shape::of(body.as_bytes());
        assert_eq!(shape.objects, 580_004);
        let mutate = shape.work(Hook::Mutate, body.len());
        let validate = shape.work(Hook::Validate, body.len());
        assert!(mutate > 10 * body.len() * PER_BODY_BYTE, "{mutate}");
        assert!(
            mutate > MAX_REVIEW_WORK,
            "the round's review is refused: {mutate}"
        );
        assert!(
            validate < MAX_REVIEW_WORK,
            "validating it alone fits: {validate}"
        );
    }

    #[test]
    fn the_largest_review_of_ordinary_rules_fits_for_either_hook() {
        let rule = r#"{"alert":"Alert0000001","expr":"vector(1)","labels":{"severity":"warning"}}"#;
        let rules = vec![rule; 3 * 1024 * 1024 / rule.len() / 2].join(",");
        let object = format!(r#"{{"spec":{{"groups":[{{"rules":[{rules}]}}]}}}}"#);
        let body = format!(r#"{{"request":{{"object":{object},"oldObject":{object}}}}}"#);
        let shape = Shape::of(body.as_bytes());
        for hook in [Hook::Validate, Hook::Mutate] {
            let work = shape.work(hook, body.len());
            assert!(work < MAX_REVIEW_WORK, "{hook:?}: {work}");
        }
    }
}
