//! Fixtures for the tests in `tests/tests/`: each folder in `tests/fixtures/` holds an
//! `operator.yaml` whose `primary.crd` points at a real CRD in `../shared/crds`, and is named
//! for the CRD and the relations it covers.

use std::path::{Path, PathBuf};

use operator_gen::{
    Generated, Manifest, Request, Selection,
    manifest::{Derived, Runtime},
    scaffold::NewPrimary,
    vendor::RuntimePath,
};

/// The workspace root, where `cargo xtask` runs.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

/// This repository's runtime/ folder, where it is: what the crates a test builds in one batch
/// name, so that one runtime is compiled for all of them rather than a vendored copy each.
pub fn shared_runtime() -> RuntimePath {
    let runtime = workspace_root().join("runtime");
    RuntimePath::anywhere(runtime.to_str().expect("a UTF-8 path to the workspace"))
        .expect("a path the generator takes")
}

/// [`shared_runtime`] relative to the crate folder `dir` (which need not exist yet), as an
/// `operator.yaml` names it.
pub fn runtime_from(dir: &Path) -> RuntimePath {
    let dir = std::path::absolute(dir).expect("an absolute path");
    // The folders that exist, as the OS resolves them, then those about to be made.
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .expect("the root exists");
    let missing = dir.strip_prefix(existing).expect("below an ancestor");
    let dir = std::fs::canonicalize(existing)
        .expect("an existing folder")
        .join(missing);
    // Folders below the root, less the root itself.
    let depth = dir.components().count() - 1;
    let runtime = std::fs::canonicalize(workspace_root().join("runtime")).expect("runtime/");
    let below_root = runtime
        .strip_prefix("/")
        .expect("an absolute path")
        .to_str()
        .expect("a UTF-8 path");
    // From `dir`, `..` once per folder it is below leads to the root.
    RuntimePath::relative(&format!("{}{below_root}", "../".repeat(depth)))
        .expect("a relative path the generator takes")
}

/// `manifest` with its runtime in [`shared_runtime`].
pub fn sharing_runtime(manifest: Manifest) -> Manifest {
    Manifest {
        runtime: Some(Runtime {
            path: shared_runtime(),
        }),
        ..manifest
    }
}

/// Runs `cargo test` on a throwaway workspace of generated crates in `root`, whose members are
/// `members` (paths relative to `root`), with this workspace's Cargo.lock so dependencies
/// resolve to the versions CI already uses. Every batch shares one target directory and builds
/// without debug info, so the operators' dependencies are compiled once and the test binaries
/// stay small. Returns cargo's output when it failed.
///
/// Generated code is held to what the generator's own workspace is: clippy on every target,
/// every warning an error. Clippy lints in the same build: clippy's driver is rustc with
/// clippy's lints added and makes the same libraries and executables, so as cargo's wrapper
/// for the batch's own crates (`RUSTC_WORKSPACE_WRAPPER`, which `cargo clippy` sets too) it
/// lints every target `cargo test` compiles: libraries, binaries and tests, each as itself
/// and as a test harness. A separate `cargo clippy --all-targets` would type-check all of
/// them, and every dependency, a second time: in CI that pass cost the compile test 93 s and
/// the scaffold test 59 s more than linting in the build.
pub fn cargo_test_batch(root: &Path, members: &[String]) -> Result<(), String> {
    let list: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
    // The members name this repository's runtime/ by path ([`shared_runtime`]).
    let manifest = format!(
        "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
        list.join(", "),
    );
    std::fs::write(root.join("Cargo.toml"), manifest).expect("writing the batch workspace");
    std::fs::copy(workspace_root().join("Cargo.lock"), root.join("Cargo.lock"))
        .expect("copying Cargo.lock");
    let args = ["test", "--workspace", "--quiet"];
    let output = cargo()
        .args(args)
        .current_dir(root)
        .env(
            "CARGO_TARGET_DIR",
            workspace_root().join("target/generated-crates"),
        )
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        // Capped to nothing in dependencies, so only the batch's crates are held to it.
        .env("RUSTFLAGS", "-D warnings")
        .env("RUSTC_WORKSPACE_WRAPPER", clippy_driver())
        .output()
        .unwrap_or_else(|e| panic!("running cargo {}: {e}", args.join(" ")));
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "cargo {} (linted by clippy):\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// Clippy's driver of the toolchain that runs the tests: beside its cargo, where `cargo
/// clippy` finds it too.
fn clippy_driver() -> PathBuf {
    let driver = Path::new(env!("CARGO")).with_file_name("clippy-driver");
    assert!(
        driver.exists(),
        "{} is missing: the compile batches lint with clippy (`rustup component add clippy`)",
        driver.display()
    );
    driver
}

/// The variables `cargo run` and `cargo test` give the process they run, about its own package
/// (`CARGO_PKG_*` too), which [`cargo`] keeps from a child build.
const RUN_VARIABLES: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "OUT_DIR",
];

/// `cargo`, for a build that this process (a test, or `cargo xtask`) starts, with the
/// environment a shell would give it.
///
/// `cargo run` and `cargo test` give the process they run the variables of its package
/// ([`RUN_VARIABLES`], `CARGO_PKG_NAME`, …). Passed on, they reach the build scripts that ask
/// to be rerun when such a variable changes, ring's among them (through cc): a build started
/// from `cargo xtask`, or from one package's tests, then finds ring's script out of date for
/// the build started from a shell, or from another package's tests, in the same target
/// directory, and compiles ring again with everything above it: rustls, kube, the runtime,
/// every operator. In CI that was twice a run for the workspace, about 80 s each.
pub fn cargo() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_") || RUN_VARIABLES.contains(&key.as_ref()) {
            command.env_remove(key.as_ref());
        }
    }
    command
}

/// The variables `.ci/run` sets so that the workspace's build lints as it compiles: clippy's
/// driver as the compiler of the workspace's own crates, and warnings denied.
const LINT_VARIABLES: &[&str] = &["RUSTC_WORKSPACE_WRAPPER", "RUSTFLAGS"];

/// [`cargo`], for a workspace whose lints are not this repository's to enforce: the corpus's
/// crates, generated from CRDs nobody here wrote, are judged on whether they compile.
/// The corpus builds them in a target directory of its own, so nothing is lost by building
/// them with other flags than the workspace.
pub fn cargo_unlinted() -> std::process::Command {
    let mut command = cargo();
    for key in LINT_VARIABLES {
        command.env_remove(key);
    }
    command
}

/// A memory figure of this process from `/proc/self/status` (`VmHWM:` for the peak), in MiB,
/// for the suites that run each case in a child process and report what it cost.
pub fn memory_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The path of a real CRD in `../shared/crds`, as a command line would give it.
pub fn shared_crd(path: &str) -> String {
    workspace_root()
        .join("../shared/crds")
        .join(path)
        .display()
        .to_string()
}

/// One `operator-gen new` of each archetype, by name: what the scaffold test builds and
/// `cargo xtask charts --scaffold` checks the charts of. The imported and dynamic ones are
/// real CRDs from `../shared/crds`.
pub fn archetypes() -> Vec<(&'static str, NewPrimary)> {
    let crd = |path: &str, dynamic: bool| NewPrimary::Crd {
        source: shared_crd(path),
        kind: None,
        version: None,
        dynamic,
    };
    let derived = |namespaced: bool, also_served: &[&str]| {
        NewPrimary::Derived(Derived {
            kind: "Backup".to_owned(),
            group: "example.com".to_owned(),
            version: "v1".to_owned(),
            plural: None,
            namespaced,
            also_served: also_served.iter().map(|v| (*v).to_owned()).collect(),
        })
    };
    vec![
        (
            "imported",
            crd("monitoring.coreos.com/prometheusrules.yaml", false),
        ),
        ("builtin", NewPrimary::Builtin("Deployment".to_owned())),
        ("derived", derived(true, &[])),
        // `new --derive Backup ... --also v1alpha1,v1beta1`: its shipped tests convert every
        // version through the hub and back.
        ("derived-versions", derived(false, &["v1alpha1", "v1beta1"])),
        ("dynamic", crd("cert-manager.io/certificates.yaml", true)),
        (
            "generic",
            NewPrimary::Generic(vec![
                "Deployment".into(),
                "StatefulSet".into(),
                "ConfigMap".into(),
            ]),
        ),
    ]
}

/// Names of every fixture, sorted.
pub fn fixtures() -> Vec<String> {
    let dir = workspace_root().join("tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a fixture entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Generates a fixture in memory, as `cargo xtask gen --out <fixture>` would: with the
/// vendored runtime, as its user gets it.
pub fn generate_fixture(name: &str) -> operator_gen::Result<Generated> {
    operator_gen::generate(&fixture_request(name)?)
}

/// The request of [`generate_fixture`].
pub fn fixture_request(name: &str) -> operator_gen::Result<Request> {
    let manifest_path = workspace_root()
        .join("tests/fixtures")
        .join(name)
        .join("operator.yaml");
    Ok(Request {
        manifest: Manifest::load(&manifest_path)?,
        manifest_path: Some(manifest_path),
        crd: None,
        selection: Selection::default(),
        flags: Default::default(),
        allow_http: false,
    })
}

/// Names a generated crate defines or imports, given to derived kinds in the grid: each must
/// still give a crate that builds.
const CLASHING_KINDS: &[&str] = &[
    "Controller",
    "Context",
    "Error",
    "Result",
    "Condition",
    "Serialize",
    "JsonSchema",
    "Self",
];

/// Manifests the model accepts that no fixture covers, as (name, operator.yaml): every
/// archetype that takes relations with owns, watches and external, and a generic one sharded;
/// one kind both owned and watched; and derived kinds named like what a crate defines or imports. Generated here
/// rather than kept as fixtures, because a grid of snapshots would say nothing a reviewer
/// reads; the compile test builds and tests them with the fixtures.
pub fn grid_cases() -> Vec<(String, String)> {
    let relations = "owns:\n  - kind: ConfigMap\nwatches:\n  - kind: Secret\n    map:\n      \
                     label: example.com/owner\nexternal:\n  - name: registry\n    source: poll\n";
    let crd = workspace_root().join("../shared/crds/monitoring.coreos.com/prometheusrules.yaml");
    let crd = crd.display();
    let mut cases = vec![
        (
            "grid-crd-all-relations".to_owned(),
            format!(
                "name: grid-crd-all-relations\nprimary:\n  crd: {crd}\n{relations}sharding: true\n"
            ),
        ),
        (
            "grid-dynamic-all-relations".to_owned(),
            format!(
                "name: grid-dynamic-all-relations\nprimary:\n  crd: {crd}\n  dynamic: true\n{relations}sharding: true\n\
                 webhooks: {{ validating: true, mutating: true }}\n"
            ),
        ),
        (
            "grid-generic-all-relations".to_owned(),
            format!(
                "name: grid-generic-all-relations\nprimary:\n  generic: [Deployment, StatefulSet, ConfigMap]\n{relations}\
                 webhooks: {{ validating: true }}\n"
            ),
        ),
        (
            // Sharded, so none of its kinds is also owned (the model refuses that).
            "grid-generic-sharded".to_owned(),
            format!(
                "name: grid-generic-sharded\nprimary:\n  generic: [Deployment, StatefulSet]\n{relations}\
                 sharding: true\n"
            ),
        ),
        (
            "grid-builtin-all-relations".to_owned(),
            format!(
                "name: grid-builtin-all-relations\nprimary:\n  builtin: Deployment\n{relations}"
            ),
        ),
        (
            "grid-owned-and-watched".to_owned(),
            format!(
                "name: grid-owned-and-watched\nprimary:\n  crd: {crd}\nowns:\n  - kind: ConfigMap\nwatches:\n  - kind: ConfigMap\n    \
                 map:\n      label: example.com/owner\n"
            ),
        ),
    ];
    for kind in CLASHING_KINDS {
        let name = format!("grid-derived-{}", kind.to_lowercase());
        let manifest = format!(
            "name: {name}\nprimary:\n  derive: {{ kind: {kind}, group: example.com, version: v1, \
             namespaced: true }}\n{relations}"
        );
        cases.push((name, manifest));
    }
    cases
}

/// Generates the grid case `manifest`, with the [`shared_runtime`] the compile test builds it
/// against.
pub fn generate_grid(manifest: &str) -> operator_gen::Result<Generated> {
    let request = Request {
        manifest: sharing_runtime(Manifest::parse("operator.yaml", manifest)?),
        manifest_path: None,
        crd: None,
        selection: Selection::default(),
        flags: Default::default(),
        allow_http: false,
    };
    operator_gen::generate(&request)
}

/// What a hostile input must lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Correct code, which the compile test builds with the fixtures.
    Code,
    /// Code, from an input as large as the caps allow: it measures the worst accepted cost,
    /// and is too big to be worth compiling.
    Accepted,
    /// A clear error whose message contains this text.
    Error(&'static str),
    /// Code, from an input built to exhaust the generator (a schema whose least object is
    /// huge, a CEL rule that would run for minutes), with a warning containing this text,
    /// within [`BOUNDED_PEAK_MIB`] of memory.
    Bounded(&'static str),
}

/// The most memory a [`Expect::Bounded`] case may take at its peak, over the test binary's
/// own: a bound the hardening issue set for every input built to exhaust the generator.
pub const BOUNDED_PEAK_MIB: f64 = 512.0;

/// The CRDs of [`hostile_cases`] built to exhaust the generator: a least object too large to
/// build, and CEL rules too deep to parse or too costly to run.
fn exhausting_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let spec = |field: &str, body: &str| {
        format!(
            "            spec:\n              type: object\n              required: [{field}]\n              properties:\n{body}"
        )
    };
    let with_rule = |kind: &str, rule: &str| {
        let body = format!(
            "            spec:\n              type: object\n              x-kubernetes-validations: [{{ rule: \"{rule}\" }}]\n              properties: {{ name: {{ type: string }} }}\n"
        );
        crd_with(kind, &body).into_bytes()
    };
    let nested = spec(
        "grid",
        "                grid:
                  type: array
                  minItems: 1000
                  items:
                    type: array
                    minItems: 1000
                    items: { type: array, minItems: 1000, items: { type: integer } }
",
    );
    let numbers: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let numbers = format!("[{}]", numbers.join(","));
    let strings: Vec<String> = (0..1000).map(|i| format!("'{i}'")).collect();
    let strings = format!("[{}]", strings.join(","));
    vec![
        ("least-object-of-nested-min-items", crd_with("Grid", &nested).into_bytes(), Expect::Bounded("cut short at `spec.grid[]")),
        ("least-object-of-2-40-items", crd_with("Many", &spec("items", "                items: { type: array, minItems: 1099511627776, items: { type: string } }\n")).into_bytes(), Expect::Bounded("cut short at `spec.items")),
        ("least-object-of-a-2-33-byte-string", crd_with("Long", &spec("text", "                text: { type: string, minLength: 8589934592 }\n")).into_bytes(), Expect::Bounded("cut short at `spec.text")),
        ("cel-selection-of-200000-steps", with_rule("Chain", &format!("self{}", ".a".repeat(200_000))), Expect::Bounded("over the cap of")),
        ("cel-macros-nested-over-literal-lists", with_rule("Nested", &format!("{numbers}.all(x, {numbers}.all(y, {numbers}.all(z, x + y + z >= 0)))")), Expect::Bounded("estimated cost")),
        ("cel-product-of-two-string-lists", with_rule("Product", &format!("{strings}.map(x, {strings}.map(y, x + y)).size() > 0")), Expect::Bounded("estimated cost")),
    ]
}

/// A CRD for kind `kind` whose `spec` (and `status`, when given) use the YAML schemas given,
/// indented as `openAPIV3Schema.properties` entries.
pub fn crd_with(kind: &str, properties: &str) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.hostile.example.com
spec:
  group: hostile.example.com
  scope: Namespaced
  names: {{ kind: {kind}, plural: {plural} }}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
{properties}"
    )
}

/// Hostile and malformed CRDs, each with the outcome it must have. Names say what they hold.
pub fn hostile_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let spec = |body: &str| {
        format!("            spec:\n              type: object\n              properties:\n{body}")
    };
    let keywords = spec(
        "                type: { type: string }
                self: { type: string }
                Self: { type: string }
                crate: { type: string }
                fn: { type: integer }
                match: { type: boolean }
                async: { type: string }
                fooBar: { type: string }
                foo_bar: { type: string }
                foo-bar: { type: string }
                FooBar: { type: string }
                \"a\\\"b\": { type: string }
                \"quote\\\")] fn evil() {} #[serde(rename = \\\"x\": { type: string }
",
    );
    let descriptions = "            spec:
              type: object
              description: \"Ends a comment */ and a raw string \\\"# and an attribute #[cfg(any())] here.\\n```\\nfn main() { panic!() }\\n```\\n\\n    fn indented() { panic!() }\\n\"
              properties:
                field: { type: string, description: \"*/ fn evil() {} /*\" }
";
    let enums = spec(
        "                mode: { type: string, enum: [\"1\", \"a b\", \"\", \"-\", \"Foo\", \"foo\", \"FOO\", \"mod\", \"x\\\"y\"] }
                flag: { type: boolean, enum: [true] }
                nullable: { type: string, nullable: true, enum: [\"on\", null] }
",
    );
    let unknown_fields = "            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
";
    let root_unknown = "            spec: { type: object, properties: { size: { type: integer } } }
          x-kubernetes-preserve-unknown-fields: true
";
    let int_or_string = spec("                port: { x-kubernetes-int-or-string: true }\n");
    let combinators = spec(
        "                either:
                  oneOf: [{ type: string }, { type: integer }]
                any:
                  anyOf: [{ type: string }, { type: object }]
                all:
                  type: object
                  allOf: [{ properties: { a: { type: string } } }]
                  properties: { a: { type: string } }
",
    );
    let maps = spec(
        "                free: { type: object, additionalProperties: true }
                strings: { type: object, additionalProperties: { type: string } }
                objects: { type: object, additionalProperties: { type: object, properties: { x: { type: integer } } } }
                nested: { type: object, additionalProperties: { type: object, additionalProperties: { type: array, items: { type: string } } } }
",
    );
    let metadata = format!(
        "            metadata:
              type: object
              properties:
                name: {{ type: string, maxLength: 63 }}
{}",
        spec("                size: { type: integer }\n")
    );
    let mut deep = String::from("            spec:\n");
    for depth in 0..200 {
        let pad = " ".repeat(14 + 2 * depth);
        deep.push_str(&format!("{pad}type: object\n{pad}properties:\n{pad}  n:\n"));
    }
    deep.push_str(&format!("{}type: string\n", " ".repeat(14 + 400)));

    let strange_names = spec(
        "                \"x²\": { type: string }
                \"a b\": { type: string }
                \"日本\": { type: object, properties: { \"ü\": { type: string } } }
                \"x<y>\": { type: object, properties: { z: { type: string } } }
                Option: { type: object, properties: { value: { type: string } } }
",
    );
    let unknown_types = spec(
        "                odd: { type: foo, description: a type OpenAPI does not have }
                when: { type: date, format: sometime }
                big: { type: integer, format: int128 }
                listed: { type: array, items: { type: bar } }
",
    );
    let invisible = "            spec:
              type: object
              description: \"carriage\\rreturn, line\\u2028separator, bidi \\u202eoverride, nul \\0 here\"
              properties:
                field: { type: string, description: \"\\u202e fn evil() {} \\r\" }
";
    let two_versions = |first: &str, second: &str| {
        let one = crd_with("Twins", &spec("                a: { type: string }\n"));
        let (head, version) = one.split_at(one.find("    - name: v1").expect("a version"));
        let other = version
            .replace("name: v1", &format!("name: {second}"))
            .replace("storage: true", "storage: false");
        format!(
            "{head}{}{other}",
            version.replace("name: v1", &format!("name: {first}"))
        )
    };
    let mut aliases = crd_with(
        "Aliased",
        "            spec:\n              type: object\n              properties:\n                a0: &a0 { type: object, properties: { x: { type: string }, y: { type: string } } }\n",
    );
    for level in 1..24 {
        aliases.push_str(&format!(
            "                a{level}: &a{level} {{ type: object, properties: {{ l: *a{prev}, r: *a{prev} }} }}\n",
            prev = level - 1
        ));
    }
    // Objects holding two of the object below through aliases, 12 levels of them: about
    // 16,000 properties once expanded, under the property and node caps.
    let mut near_caps = crd_with(
        "Wide",
        "            spec:\n              type: object\n              properties:\n                b0: &b0 { type: object, properties: { x: { type: string }, y: { type: string } } }\n",
    );
    for level in 1..12 {
        near_caps.push_str(&format!(
            "                b{level}: &b{level} {{ type: object, properties: {{ l: *b{prev}, r: *b{prev} }} }}\n",
            prev = level - 1
        ));
    }
    let mut past_caps = near_caps.clone();
    past_caps.push_str("                c: { type: object, properties: { l: *b11, r: *b11 } }\n");
    // Nine served versions of one aliased tree of about 4,000 properties: each under the
    // property cap, together over it (once 1 GB in the generator and 11 MB of types).
    let mut versions = String::from(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: manies.hostile.example.com }
spec:
  group: hostile.example.com
  scope: Namespaced
  names: { kind: Many, plural: manies }
  versions:
    - name: v1
      served: true
      storage: true
      schema: &schema
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                b0: &b0 { type: object, properties: { x: { type: string }, y: { type: string } } }
",
    );
    for level in 1..10 {
        versions.push_str(&format!(
            "                b{level}: &b{level} {{ type: object, properties: {{ l: *b{prev}, r: *b{prev} }} }}\n",
            prev = level - 1
        ));
    }
    for version in 2..10 {
        versions.push_str(&format!(
            "    - {{ name: v{version}, served: true, storage: false, schema: *schema }}\n"
        ));
    }
    // Just under the byte cap: 15 MiB of descriptions on 240 properties.
    let mut heavy =
        String::from("            spec:\n              type: object\n              properties:\n");
    let words = "the quick brown fox jumps over the lazy dog ".repeat(1490);
    for i in 0..240 {
        heavy.push_str(&format!(
            "                p{i}: {{ type: string, description: \"{words}\" }}\n"
        ));
    }
    let breakout_name = crd_with("Widget", &spec("                a: { type: string }\n")).replace(
        "  name: widgets.hostile.example.com",
        "  name: \"widgets`\\n//! ```\\nfn evil() {}\\n\"",
    );

    let no_schema = crd_with("Widget", "").replace(
        "      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n",
        "",
    );
    let mut huge = crd_with("Widget", &spec("                a: { type: string }\n")).into_bytes();
    huge.extend(std::iter::repeat_n(b'#', 50 * 1024 * 1024));

    vec![
        ("empty-file", Vec::new(), Expect::Error("empty")),
        ("not-yaml", b"{ this: [is not yaml".to_vec(), Expect::Error("not YAML")),
        ("not-a-crd", b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n".to_vec(), Expect::Error("`kind` \"Deployment\"")),
        ("crd-without-schema", no_schema.into_bytes(), Expect::Error("openAPIV3Schema")),
        (
            "v1beta1-crd",
            crd_with("Widget", &spec("                a: { type: string }\n"))
                .replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
                .into_bytes(),
            Expect::Error("v1beta1"),
        ),
        ("file-of-50-mb", huge, Expect::Error("limit")),
        ("invalid-utf8", b"apiVersion: \xff\xfe\n".to_vec(), Expect::Error("UTF-8")),
        ("schema-nested-200-deep", crd_with("Deep", &deep).into_bytes(), Expect::Error("depth cap")),
        ("keyword-and-colliding-properties", crd_with("Keywords", &keywords).into_bytes(), Expect::Code),
        ("kind-option", crd_with("Option", &spec("                some: { type: string }\n")).into_bytes(), Expect::Code),
        ("kind-result", crd_with("Result", &spec("                ok: { type: string }\n")).into_bytes(), Expect::Code),
        ("kind-string", crd_with("String", &spec("                value: { type: string }\n")).into_bytes(), Expect::Code),
        ("kind-box", crd_with("Box", &spec("                inner: { type: object, properties: { b: { type: string } } }\n")).into_bytes(), Expect::Code),
        ("descriptions-with-code", crd_with("Described", descriptions).into_bytes(), Expect::Code),
        ("enum-values", crd_with("Enums", &enums).into_bytes(), Expect::Code),
        ("preserve-unknown-spec-and-status", crd_with("Unknown", unknown_fields).into_bytes(), Expect::Code),
        ("preserve-unknown-root", crd_with("RootUnknown", root_unknown).into_bytes(), Expect::Code),
        ("int-or-string", crd_with("Ports", &int_or_string).into_bytes(), Expect::Code),
        ("one-any-all-of", crd_with("Combined", &combinators).into_bytes(), Expect::Code),
        ("additional-properties", crd_with("Maps", &maps).into_bytes(), Expect::Code),
        ("metadata-with-schema", crd_with("Named", &metadata).into_bytes(), Expect::Code),
        ("kind-self", crd_with("Self", &spec("                value: { type: string }\n")).into_bytes(), Expect::Code),
        ("property-names-that-are-not-identifiers", crd_with("Strange", &strange_names).into_bytes(), Expect::Code),
        ("schema-types-openapi-does-not-have", crd_with("Unknowns", &unknown_types).into_bytes(), Expect::Code),
        ("descriptions-with-invisible-characters", crd_with("Invisible", invisible).into_bytes(), Expect::Code),
        ("versions-that-collide-once-sanitized", two_versions("v1-beta", "v1--beta").into_bytes(), Expect::Code),
        ("duplicate-version-names", two_versions("v1", "v1").into_bytes(), Expect::Error("spec.versions[1].name")),
        ("crd-name-breaking-out-of-a-comment", breakout_name.into_bytes(), Expect::Error("metadata.name")),
        ("alias-bomb", aliases.into_bytes(), Expect::Error("nodes")),
        ("aliases-expanding-to-the-most-accepted", near_caps.into_bytes(), Expect::Accepted),
        ("aliases-expanding-past-the-property-cap", past_caps.into_bytes(), Expect::Error("property cap")),
        ("versions-of-one-aliased-tree-past-the-property-cap", versions.into_bytes(), Expect::Error("across the versions it serves")),
        ("descriptions-filling-the-byte-cap", crd_with("Heavy", &heavy).into_bytes(), Expect::Accepted),
    ]
    .into_iter()
    .chain(exhausting_cases())
    .collect()
}

/// Generates a hostile case from a file in `dir`, as a user pointing `--crd` at it would; with
/// `runtime`, naming that runtime folder rather than vendoring one.
pub fn generate_hostile(
    name: &str,
    bytes: &[u8],
    dir: &Path,
    runtime: Option<RuntimePath>,
) -> operator_gen::Result<Generated> {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, bytes).expect("writing the hostile CRD");
    let request = Request {
        manifest: Manifest {
            name: Some(format!("hostile-{name}")),
            runtime: runtime.map(|path| Runtime { path }),
            ..Manifest::default()
        },
        manifest_path: None,
        crd: Some(operator_gen::CrdSource::File(path)),
        selection: Selection::default(),
        flags: operator_gen::model::CommandFlags {
            crd: true,
            ..Default::default()
        },
        allow_http: false,
    };
    operator_gen::generate(&request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlinted_child_cargo_gets_no_lint_flags_and_a_linted_one_keeps_them() {
        let removed = |command: &std::process::Command| -> Vec<String> {
            command
                .get_envs()
                .filter(|(_, value)| value.is_none())
                .map(|(key, _)| key.to_string_lossy().into_owned())
                .collect()
        };
        let unlinted = removed(&cargo_unlinted());
        let linted = removed(&cargo());
        for key in LINT_VARIABLES {
            assert!(
                unlinted.iter().any(|k| k == key),
                "{key} reaches the corpus's cargo"
            );
            assert!(
                !linted.iter().any(|k| k == key),
                "{key} is kept from the workspace's cargo"
            );
        }
        assert!(unlinted.iter().any(|k| k == "CARGO_MANIFEST_DIR"));
    }

    #[test]
    fn a_child_cargo_gets_none_of_the_variables_cargo_gave_this_test() {
        // `cargo test` runs this with its package's variables, which a child must not see.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let command = cargo();
        let removed: Vec<String> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(key, _)| key.to_string_lossy().into_owned())
            .collect();
        for gone in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
        ] {
            assert!(removed.iter().any(|k| k == gone), "{gone}: {removed:?}");
        }
        // What configures cargo itself stays.
        assert!(
            removed
                .iter()
                .all(|k| !k.starts_with("CARGO_HOME") && k != "CARGO_TARGET_DIR"),
            "{removed:?}"
        );
        assert!(command.get_envs().all(|(_, value)| value.is_none()));
    }

    #[test]
    fn every_grid_case_is_accepted_and_gives_a_crate_of_its_own_name() {
        for (name, manifest) in grid_cases() {
            let generated = generate_grid(&manifest).unwrap_or_else(|e| panic!("{name}: {e}"));
            let cargo_toml = generated
                .plan
                .files
                .iter()
                .find(|file| file.path.as_os_str() == "Cargo.toml")
                .map(|file| file.contents.clone())
                .unwrap_or_else(|| panic!("{name}: no Cargo.toml"));
            assert!(
                cargo_toml.contains(&format!("name = \"{name}\"")),
                "{name}: {cargo_toml}"
            );
        }
    }
}
