//! How much the whole pipeline costs over plain kopium on the same CRD, in one process.
//!
//! Baseline: what a user of kopium's library does by hand: read the file, parse the CRD, call
//! `TypeGenerator::generate_rust_types_for`. Measured: `operator_gen::generate`, which does
//! that and then parses and formats the types, builds the model and renders every template.
//! Run with `cargo bench -p operator-gen --bench pipeline`; it prints medians and the ratio.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use operator_gen::{CrdSource, Manifest, Request, Selection};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm caches and allocator
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn kopium_alone(path: &Path) {
    let text = std::fs::read_to_string(path).expect("reading the CRD");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
    // The same version the pipeline picks by default: the storage version.
    let storage = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone());
    let generator = kopium::TypeGenerator::builder()
        .api_version(storage)
        .emit_docs(true)
        .build();
    let code = generator
        .generate_rust_types_for(&crd, None::<&str>)
        .expect("kopium output");
    std::hint::black_box(code);
}

fn whole_pipeline(path: &Path) {
    let request = Request {
        manifest: Manifest::default(),
        manifest_path: None,
        crd: Some(CrdSource::File(path.to_owned())),
        selection: Selection::default(),
        flags: Default::default(),
        allow_http: false,
    };
    std::hint::black_box(operator_gen::generate(&request).expect("generation"));
}

fn largest_crd(dir: &Path) -> Option<PathBuf> {
    let mut largest: Option<(u64, PathBuf)> = None;
    for group in std::fs::read_dir(dir).ok()?.flatten() {
        for file in std::fs::read_dir(group.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            if file.path().extension().is_some_and(|e| e == "yaml")
                && largest.as_ref().is_none_or(|(s, _)| size > *s)
            {
                largest = Some((size, file.path()));
            }
        }
    }
    largest.map(|(_, path)| path)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let mut inputs = vec![root.join("crds/monitoring.coreos.com/prometheusrules.yaml")];
    inputs.extend(largest_crd(&root.join("../shared/crds")));
    println!(
        "{:<60} {:>12} {:>12} {:>7}",
        "CRD", "kopium", "operator-gen", "ratio"
    );
    for path in inputs {
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let runs = if size > 500_000 { 5 } else { 25 };
        let baseline = time(runs, || kopium_alone(&path));
        let measured = time(runs, || whole_pipeline(&path));
        let name = format!(
            "{} ({} KiB)",
            path.file_name().unwrap_or_default().to_string_lossy(),
            size / 1024
        );
        println!(
            "{name:<60} {:>10.1}ms {:>10.1}ms {:>6.2}x",
            baseline.as_secs_f64() * 1e3,
            measured.as_secs_f64() * 1e3,
            measured.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
