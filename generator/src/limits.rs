//! Every cap on untrusted input in one place, and the YAML options built from them.
//!
//! A CRD comes from a URL, a file or stdin, and a manifest from whoever wrote it: both are
//! strangers' input. Each read and each parse runs inside the caps below, and going over one
//! ends in an error that names the cap, so a hostile or broken input costs bounded memory
//! and time instead of exhausting either. The README quotes these values.

use std::time::Duration;

use serde_saphyr::budget::BudgetBreach;

/// Reads `reader` to its end when it holds at most `max` bytes, and gives `None` when it holds
/// more. Reading stops one byte past the cap, so `/dev/zero` or a runaway pipe costs `max`
/// bytes of memory, never more. Every input file and body is read through this.
pub fn read_at_most(reader: impl std::io::Read, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut reader.take(max + 1), &mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// The largest CRD accepted from any source, counted after decompression. The largest real
/// CRDs are under 2 MiB; a bundle of typical CRDs this size parses within the YAML caps.
pub const MAX_CRD_BYTES: u64 = 16 * 1024 * 1024;

/// The largest `operator.yaml` accepted. A full manifest is a few KiB.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// The largest file operator-gen reads or writes in a crate folder. A plan holding a larger
/// file is refused, so the writer can always read back what it wrote; a larger file found
/// there is not one of its files. The largest outputs are `src/types.rs` and
/// `deploy/base/crd.yaml` of a CRD at the [`MAX_CRD_BYTES`] cap; both stay below this.
pub const MAX_CRATE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The largest journal of an interrupted write ([`crate::write_plan`]): it lists a few dozen
/// paths.
pub const MAX_JOURNAL_BYTES: u64 = 1024 * 1024;

/// The longest a CRD fetch may take from start to end, across redirects and including the
/// whole body, so a server that trickles a byte a second cannot hold a run forever.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(60);

/// The longest wait to open a connection to a CRD's host.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait for any one read from a CRD's host (response head or body).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most redirects followed for one fetch.
pub const MAX_REDIRECTS: u32 = 5;

/// How deeply YAML collections may nest. The deepest of 150 real CRDs nests 38 levels. Each
/// level costs stack in the parser and in every recursive stage after it (kopium, the
/// schema walkers, dropping nested values), so every stage that reads input runs on a
/// thread with [`STACK_BYTES`] of stack; see [`with_deep_stack`].
pub const MAX_YAML_DEPTH: usize = 64;

/// The stack of the threads that parse and analyze input. How much stack a level of nesting
/// takes depends on the build (an optimized parser inlines into bigger frames): a 2 MiB test
/// thread was measured to overflow at about 84 levels in one build and below 64 in another.
/// A stack is address space, touched only as deep as a run goes, so room to spare is cheap.
pub const STACK_BYTES: usize = 256 * 1024 * 1024;

/// Runs `work` on a thread with [`STACK_BYTES`] of stack, so input nested up to the caps
/// cannot overflow the stack whatever thread called, and returns what it returns. A panic in
/// `work` continues on the calling thread. Should no thread be had, `work` runs here.
pub fn with_deep_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    let mut work = Some(work);
    let ran = std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("operator-gen".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || work.take().map(|work| work()));
        let joined = thread.ok().map(|handle| handle.join());
        joined.map(|result| result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    match (ran.flatten(), work) {
        (Some(done), _) => done,
        (None, Some(work)) => work(),
        (None, None) => unreachable!("the work either ran on the thread or is still here"),
    }
}

/// How many YAML nodes (mappings, sequences and scalars, keys included) one input may hold,
/// counting every node an alias expands to, so this also bounds alias expansion. The largest
/// of 150 real CRDs has 45,843 nodes in this count; 15 MiB of them bundled together had
/// 385,908. An alias bomb stopped at this cap was measured at under 100 MiB of memory and
/// about 3 s in a debug build.
pub const MAX_YAML_NODES: usize = 500_000;

/// How many aliases (`*name`) one input may use, and how many anchors (`&name`) it may
/// define. Real CRDs use none; generated YAML rarely needs more than a handful.
pub const MAX_YAML_ALIASES: usize = 1_000;

/// How many YAML documents (`---`) one input may hold.
pub const MAX_YAML_DOCUMENTS: usize = 1_000;

/// How many properties a CRD's schemas may declare, counting every property of every nested
/// object, item and map value, summed over every version whose types are generated (each
/// served one). Types are generated for each, so this bounds the generated code, the time to
/// write it and the cost of compiling it, which the node cap alone does not: aliases can
/// expand a small file into a schema of tens of thousands of distinct paths, and nine served
/// versions of one aliased tree multiply it. The largest of 150 real CRDs declares 7,965 in
/// all (argoproj.io ApplicationSet v1alpha1, its one version).
pub const MAX_SCHEMA_PROPERTIES: usize = 20_000;

/// The longest duration a manifest may give. Generated code holds delays as milliseconds and
/// hands them to tokio timers, where an unbounded one wrapped (a huge `errorBackoffMax`
/// became 384 ms) or panicked (a huge poll interval); a week is far past any sensible delay.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The shortest error backoff (`requeue.errorBackoff`, `requeue.errorBackoffMax`): below a
/// millisecond the generated code would round it to zero and retry in a hot loop.
pub const MIN_ERROR_BACKOFF: Duration = Duration::from_millis(1);

/// The shortest poll interval (`external[].interval`) and periodic requeue (`requeue.after`):
/// generated code counts both in whole seconds.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The longest CEL expression (a rule or a `messageExpression`) handed to the CEL parser.
/// The longest of 871 in 150 real CRDs is 1,363 bytes. The parser (the `cel` crate, not
/// this project's) builds its syntax tree by recursion, so its text is bounded here first,
/// with [`MAX_CEL_NESTING`] and [`MAX_CEL_CHAIN`], before it is parsed at all.
pub const MAX_CEL_BYTES: usize = 16 * 1024;

/// How deeply `(`, `[` and `{` may nest in a CEL expression. The deepest of 150 real CRDs
/// nests 6.
pub const MAX_CEL_NESTING: usize = 32;

/// How many selections (`.`) and operators one CEL expression may chain at one level of
/// nesting: `a.b.c` chains two, `a.b + c` two. Each is a level of the parser's syntax
/// tree, so a 200,000-step selection overflowed the stack. The longest chain in 150 real
/// CRDs has 32, counting each character of an operator (`==` is two).
pub const MAX_CEL_CHAIN: usize = 256;

/// The most a CEL rule may cost by the generator's static estimate ([`crate::cel`]), in
/// about the steps its evaluation takes. CEL evaluation cannot be interrupted, so a rule
/// over this is not evaluated: nested `.all()` over literal lists of 1,000 items, or a
/// product of two such lists of strings, ran past 120 s. The API server refuses a rule
/// whose estimated cost is over 10,000,000 in its units.
pub const MAX_CEL_COST: u64 = 10_000_000;

/// Why a CEL expression's text is over [`MAX_CEL_BYTES`], [`MAX_CEL_NESTING`] or
/// [`MAX_CEL_CHAIN`], checked without parsing it: string literals are skipped, so what they
/// hold is not counted.
pub fn cel_text_over_caps(text: &str) -> Option<String> {
    if text.len() > MAX_CEL_BYTES {
        return Some(format!(
            "it is {} bytes long, over the cap of {MAX_CEL_BYTES}",
            text.len()
        ));
    }
    // One chain per open bracket, and one for the top level.
    let mut chains = vec![0usize];
    // The open quote, and whether the string is raw (`r'…'`: a backslash is itself).
    let mut string: Option<(u8, bool)> = None;
    let mut previous = b' ';
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        match (string, byte) {
            (Some((_, false)), b'\\') => {
                bytes.next();
            }
            (Some((open, _)), _) if byte == open => string = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => string = Some((byte, matches!(previous, b'r' | b'R'))),
            (None, b'(' | b'[' | b'{') => {
                chains.push(0);
                if chains.len() > MAX_CEL_NESTING + 1 {
                    return Some(format!(
                        "its brackets nest deeper than the cap of {MAX_CEL_NESTING}"
                    ));
                }
            }
            (None, b')' | b']' | b'}') if chains.len() > 1 => {
                chains.pop();
            }
            (None, b',') => chains.last_mut().into_iter().for_each(|chain| *chain = 0),
            (None, b'.' | b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'&')
            | (None, b'|' | b'?' | b':') => {
                let chain = chains.last_mut().map_or(0, |chain| {
                    *chain += 1;
                    *chain
                });
                if chain > MAX_CEL_CHAIN {
                    return Some(format!(
                        "it chains more than {MAX_CEL_CHAIN} selections and operators at one level"
                    ));
                }
            }
            (None, _) => {}
        }
        previous = byte;
    }
    None
}

/// The options every YAML read in the generator uses: the caps above as a serde-saphyr
/// budget, short error messages, and YAML 1.2 scalars.
///
/// YAML 1.2 scalars (`on` and `yes` stay strings, `0755` and `1_000` too) are what
/// serde_yaml read, so a CRD means the same as before; all 150 CRDs in the corpus parse to
/// identical values either way.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_YAML_DEPTH;
    budget.max_nodes = MAX_YAML_NODES;
    budget.max_aliases = MAX_YAML_ALIASES;
    budget.max_anchors = MAX_YAML_ALIASES;
    budget.max_merge_keys = MAX_YAML_ALIASES;
    budget.max_documents = MAX_YAML_DOCUMENTS;
    // The caps that follow are derived from the ones above and sized so that those trip
    // first: a node is at most a start and an end event, and text cannot outgrow the input
    // except through aliases, which the node cap already bounds.
    budget.max_events = 4 * MAX_YAML_NODES + 2 * MAX_YAML_DOCUMENTS;
    budget.max_recorded_anchor_events = MAX_YAML_NODES;
    budget.max_recorded_anchor_bytes = MAX_CRD_BYTES as usize;
    budget.max_total_scalar_bytes = MAX_CRD_BYTES as usize;
    budget.max_reader_input_bytes = Some(MAX_CRD_BYTES as usize);

    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = MAX_YAML_NODES;
    options.alias_limits.max_replay_stack_depth = MAX_YAML_DEPTH;
    // Comments are never used; not keeping them saves their memory.
    options.emit_comments = false;
    // A snippet repeats the stranger's text across several lines; line and column suffice.
    options.with_snippet = false;
    options.strict_booleans = true;
    options.leading_zero_numbers_as_strings = true;
    options.underscored_numbers_as_strings = true;
    options
}

/// A serde-saphyr error reduced to what a person needs: where, what, and whether a cap
/// (rather than the text itself) stopped the parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct YamlProblem {
    /// 1-based line and column, when known.
    pub at: Option<(u64, u64)>,
    /// One short line: the reason, or for a cap, the cap and its value.
    pub reason: String,
    /// Whether a cap of this module was breached.
    pub over_cap: bool,
}

impl YamlProblem {
    /// Reduces `err`, dropping source snippets, escaping control characters and shortening
    /// the message, because all of it may be the stranger's text.
    pub(crate) fn from_error(err: &serde_saphyr::Error) -> Self {
        use serde_saphyr::{Error as E, MessageFormatter as _};
        let at = err
            .location()
            .map(|l| (l.line(), l.column()))
            .filter(|(line, _)| *line > 0);
        let cap = match original(err) {
            E::Budget { breach, .. } => Some(breach_reason(breach)),
            E::AliasReplayLimitExceeded { .. } | E::AliasExpansionLimitExceeded { .. } => {
                Some(nodes_reason())
            }
            E::AliasReplayStackDepthExceeded { .. } => Some(depth_reason()),
            _ => None,
        };
        match cap {
            Some(reason) => Self {
                at,
                reason,
                over_cap: true,
            },
            None => Self {
                at,
                reason: short(&serde_saphyr::UserMessageFormatter.format_message(original(err))),
                over_cap: false,
            },
        }
    }

    /// `reason at line L, column C`, or the reason alone.
    pub(crate) fn with_position(&self) -> String {
        match self.at {
            Some((line, column)) => format!("{} at line {line}, column {column}", self.reason),
            None => self.reason.clone(),
        }
    }
}

/// The error behind the wrappers that add snippets and alias locations.
fn original(mut err: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = err
    {
        err = error;
    }
    err
}

fn depth_reason() -> String {
    format!("nesting deeper than the YAML depth cap of {MAX_YAML_DEPTH} levels")
}

fn nodes_reason() -> String {
    format!(
        "more than the YAML node cap of {MAX_YAML_NODES} nodes, counting what aliases expand to"
    )
}

/// Names the cap behind a budget breach.
fn breach_reason(breach: &BudgetBreach) -> String {
    let mib = MAX_CRD_BYTES / (1024 * 1024);
    match breach {
        BudgetBreach::Depth { .. } => depth_reason(),
        BudgetBreach::Nodes { .. }
        | BudgetBreach::Events { .. }
        | BudgetBreach::RecordedAnchorEvents { .. } => nodes_reason(),
        BudgetBreach::Aliases { .. }
        | BudgetBreach::Anchors { .. }
        | BudgetBreach::MergeKeys { .. } => format!(
            "more than the YAML alias cap of {MAX_YAML_ALIASES} aliases, anchors or merge keys"
        ),
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => format!(
            "{aliases} aliases for {anchors} anchors: more than 10 uses per anchor, which the \
             YAML alias cap refuses as a likely alias bomb"
        ),
        BudgetBreach::Documents { .. } => {
            format!("more than the YAML document cap of {MAX_YAML_DOCUMENTS} documents")
        }
        BudgetBreach::ScalarBytes { .. }
        | BudgetBreach::RecordedAnchorBytes { .. }
        | BudgetBreach::InputBytes { .. } => format!(
            "more than {mib} MiB of text, counting what aliases expand to (the CRD size cap)"
        ),
        other => format!("over a YAML parsing cap ({other:?})"),
    }
}

/// At most 200 characters, one line, control characters escaped.
fn short(text: &str) -> String {
    const MAX_CHARS: usize = 200;
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `limit` as a person reads it: `16 MiB`, `1 MiB`, `512 KiB`.
pub(crate) fn bytes(limit: u64) -> String {
    if limit >= 1024 * 1024 && limit.is_multiple_of(1024 * 1024) {
        format!("{} MiB", limit / (1024 * 1024))
    } else if limit >= 1024 && limit.is_multiple_of(1024) {
        format!("{} KiB", limit / 1024)
    } else {
        format!("{limit} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<serde_json::Value>, YamlProblem> {
        serde_saphyr::from_str_multiple_with_options::<serde_json::Value, Vec<_>>(
            text,
            yaml_options(),
        )
        .map_err(|e| YamlProblem::from_error(&e))
    }

    #[test]
    fn nesting_past_the_depth_cap_names_the_cap() {
        let at_cap =
            "a: ".to_owned() + &"[".repeat(MAX_YAML_DEPTH - 1) + &"]".repeat(MAX_YAML_DEPTH - 1);
        assert!(parse(&at_cap).is_ok());
        let deeper = "a: ".to_owned() + &"[".repeat(MAX_YAML_DEPTH) + &"]".repeat(MAX_YAML_DEPTH);
        let problem = parse(&deeper).unwrap_err();
        assert!(problem.over_cap, "{problem:?}");
        assert!(
            problem.reason.contains("depth cap") && problem.reason.contains("64"),
            "{problem:?}"
        );
        assert_eq!(problem.at.map(|(line, _)| line), Some(1));
    }

    #[test]
    fn an_alias_bomb_stops_at_the_node_cap_quickly() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let uses = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{uses}]\n"));
        }
        let started = std::time::Instant::now();
        let problem = parse(&bomb).unwrap_err();
        assert!(problem.over_cap, "{problem:?}");
        assert!(problem.reason.contains("node cap"), "{problem:?}");
        // 10^9 nodes if expanded; the cap stops it after 500,000 (seconds in a debug build).
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn many_aliases_hit_the_alias_cap() {
        let uses = vec!["*a"; MAX_YAML_ALIASES + 1].join(", ");
        let many = format!("a: &a x\nb: [{uses}]\n");
        let problem = parse(&many).unwrap_err();
        assert!(problem.over_cap, "{problem:?}");
        assert!(problem.reason.contains("alias"), "{problem:?}");
    }

    #[test]
    fn a_document_storm_hits_the_document_cap() {
        let storm = "x: 1\n---\n".repeat(MAX_YAML_DOCUMENTS + 1);
        let problem = parse(&storm).unwrap_err();
        assert!(problem.over_cap, "{problem:?}");
        assert!(problem.reason.contains("document cap"), "{problem:?}");
    }

    #[test]
    fn syntax_errors_are_one_short_line_with_a_position() {
        let problem = parse("a: [b\n").unwrap_err();
        assert!(!problem.over_cap);
        assert_eq!(problem.at, Some((1, 4)));
        assert!(!problem.with_position().contains('\n'), "{problem:?}");

        let key = format!(
            "\"{}\u{1b}[31m\": 1\n\"{}\u{1b}[31m\": 2\n",
            "k".repeat(500),
            "k".repeat(500)
        );
        let problem = parse(&key).unwrap_err();
        assert!(!problem.reason.contains('\u{1b}'), "{problem:?}");
        assert!(problem.reason.chars().count() <= 201, "{problem:?}");
    }

    #[test]
    fn scalars_read_as_yaml_1_2_as_serde_yaml_did() {
        let values = parse("a: [on, yes, 0755, 1_000, 1e3, ~]\n").unwrap();
        assert_eq!(
            values[0],
            serde_json::json!({"a": ["on", "yes", "0755", "1_000", 1000.0, null]})
        );
    }

    #[test]
    fn sizes_read_in_the_largest_whole_unit() {
        assert_eq!(bytes(MAX_CRD_BYTES), "16 MiB");
        assert_eq!(bytes(512 * 1024), "512 KiB");
        assert_eq!(bytes(1000), "1000 bytes");
    }

    #[test]
    fn cel_text_caps_count_chains_and_brackets_outside_strings() {
        let long_chain = format!("self{}", ".a".repeat(MAX_CEL_CHAIN + 1));
        assert!(cel_text_over_caps(&long_chain).is_some());
        // The same dots inside a string, or split by commas into arguments, are no chain.
        let quoted = format!("self.a == '{}'", ".".repeat(MAX_CEL_CHAIN + 1));
        assert_eq!(cel_text_over_caps(&quoted), None);
        let raw = format!(
            "r'\\' == self.a && '{}' != ''",
            ".".repeat(MAX_CEL_CHAIN + 1)
        );
        assert_eq!(
            cel_text_over_caps(&raw),
            None,
            "a raw string ends at its quote"
        );
        let arguments = vec!["x.y.z"; MAX_CEL_CHAIN].join(", ");
        assert_eq!(cel_text_over_caps(&format!("f({arguments})")), None);
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_CEL_NESTING + 1),
            "]".repeat(MAX_CEL_NESTING + 1)
        );
        assert!(cel_text_over_caps(&deep).is_some());
        let nested = format!(
            "{}1{}",
            "[".repeat(MAX_CEL_NESTING),
            "]".repeat(MAX_CEL_NESTING)
        );
        assert_eq!(cel_text_over_caps(&nested), None);
        assert!(cel_text_over_caps(&"1".repeat(MAX_CEL_BYTES + 1)).is_some());
    }

    #[test]
    fn the_deepest_cel_text_within_the_caps_parses_and_runs_on_the_deep_stack() {
        // Every level as deep as the caps allow: a chain at each of the nested brackets.
        let chain = ".a".repeat(MAX_CEL_CHAIN / 2);
        let mut rule = String::from("self");
        for _ in 0..MAX_CEL_NESTING {
            rule = format!("has({rule}{chain})");
        }
        assert_eq!(cel_text_over_caps(&rule), None, "{} bytes", rule.len());
        let parsed = with_deep_stack(|| kube_cel::cel::Program::compile(&rule).is_ok());
        assert!(parsed);
    }
}
