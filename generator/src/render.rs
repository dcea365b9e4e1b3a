//! The `render` stage: the model goes through the Tera templates, and every Rust file comes
//! out parsed (so a broken template fails here) and, where generated, formatted.
//!
//! Templates can print only the escaped values of [`crate::text`]: autoescaping is on for
//! every template, and its escape function refuses instead of escaping, so a raw string in
//! `{{ }}` (a model field that is a plain `String`, or a filter's output) fails the render
//! with the template's name rather than reaching a file.

use std::{collections::BTreeMap, path::PathBuf, sync::OnceLock};

use tera::{Context, Tera};

use crate::{
    error::{Error, Result},
    model::{Archetype, Operator, Provenance},
    vendor::RuntimeSource,
    write_plan::{
        GENERATED_MARK, JSON_CHECKSUM_COMMENT, MARKDOWN_COMMENT, Ownership, Plan, PlannedFile,
        checksum_line, comment_close,
    },
};

/// How a rendered file is checked and what its comments look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Parsed, then laid out by prettyplease: kopium's output, which has no layout of its own.
    Rust,
    /// Parsed to prove it is valid, and laid out by the template in rustfmt's style. Generated
    /// modules are still `#[rustfmt::skip]`, so that a long kind name that would make rustfmt
    /// wrap a line differently never turns `cargo fmt --check` red.
    RustAsWritten,
    /// Files whose comments start with `#`: TOML, YAML, Dockerfiles.
    Hashed,
    Markdown,
    /// JSON, which has no comments: the header is the first two keys of its object, and the
    /// template renders the rest of that object (see [`header_saying`]).
    Json,
}

/// One template and where its output goes.
struct Template {
    /// Its path in `templates/`, as `operator_gen_templates::FILES` names it.
    name: &'static str,
    output: &'static str,
    ownership: Ownership,
    format: Format,
    /// The archetypes this template is rendered for; empty for all of them.
    archetypes: &'static [Archetype],
    /// What else the operator must have for this file to exist.
    needs: Needs,
}

/// A feature of the operator that some files exist for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    /// Any webhook: the HTTPS server, its certificate and its Secret.
    Webhooks,
    /// An admission webhook: the hooks and their configurations.
    Admission,
    /// A conversion webhook: a derived resource served in several versions.
    Conversion,
    /// A namespace of the operator's own (see `Webhooks::exempt_label`).
    OwnNamespace,
    /// A sample the shipped tests create (`manifest::sample`), or a generic operator's sample
    /// of each kind (`manifest::samples`).
    Sample,
}

impl Needs {
    fn met_by(self, operator: &Operator) -> bool {
        let webhooks = operator.webhooks.as_ref();
        match self {
            Needs::Nothing => true,
            Needs::Webhooks => webhooks.is_some(),
            Needs::Admission => webhooks.is_some_and(|w| !w.configurations.is_empty()),
            Needs::Conversion => webhooks.is_some_and(|w| w.conversion.is_some()),
            Needs::OwnNamespace => operator.deploy.own_namespace,
            Needs::Sample => operator.tests.sample || operator.controller.reconciled.generic,
        }
    }
}

macro_rules! template {
    ($file:literal => $output:literal, $ownership:ident, $format:ident $(, $archetype:ident)*) => {
        template!($file => $output, $ownership, $format, needs Nothing $(, $archetype)*)
    };
    ($file:literal => $output:literal, $ownership:ident, $format:ident, needs $needs:ident $(, $archetype:ident)*) => {
        Template {
            name: $file,
            output: $output,
            ownership: Ownership::$ownership,
            format: Format::$format,
            archetypes: &[$(Archetype::$archetype),*],
            needs: Needs::$needs,
        }
    };
}

/// The table of every file an operator crate consists of, per archetype.
const TEMPLATES: &[Template] = &[
    template!("Cargo.toml.tera" => "Cargo.toml", Generated, Hashed),
    template!("Dockerfile.tera" => "Dockerfile", Scaffold, Hashed),
    template!("dockerignore.tera" => ".dockerignore", Scaffold, Hashed),
    template!("gitignore.tera" => ".gitignore", Scaffold, Hashed),
    template!("deploy/base/kustomization.yaml.tera" => "deploy/base/kustomization.yaml", Generated, Hashed),
    template!("deploy/base/namespace.yaml.tera" => "deploy/base/namespace.yaml", Generated, Hashed, needs OwnNamespace),
    template!("deploy/base/rbac.yaml.tera" => "deploy/base/rbac.yaml", Generated, Hashed),
    template!("deploy/base/deployment.yaml.tera" => "deploy/base/deployment.yaml", Generated, Hashed),
    template!("deploy/base/pod-disruption-budget.yaml.tera" => "deploy/base/pod-disruption-budget.yaml", Generated, Hashed),
    template!("deploy/base/service.yaml.tera" => "deploy/base/service.yaml", Generated, Hashed),
    template!("deploy/base/crd.yaml.tera" => "deploy/base/crd.yaml", Generated, Hashed, Imported, Dynamic),
    template!("deploy/base/webhooks.yaml.tera" => "deploy/base/webhooks.yaml", Generated, Hashed, needs Webhooks),
    template!("deploy/cert-manager/kustomization.yaml.tera" => "deploy/cert-manager/kustomization.yaml", Generated, Hashed, needs Webhooks),
    template!("deploy/cert-manager/certificate.yaml.tera" => "deploy/cert-manager/certificate.yaml", Generated, Hashed, needs Webhooks),
    template!("deploy/cert-manager/cert-manager-patch.yaml.tera" => "deploy/cert-manager/cert-manager-patch.yaml", Generated, Hashed, needs Webhooks),
    template!("deploy/monitoring/kustomization.yaml.tera" => "deploy/monitoring/kustomization.yaml", Generated, Hashed),
    template!("deploy/monitoring/service-monitor.yaml.tera" => "deploy/monitoring/service-monitor.yaml", Generated, Hashed),
    template!("deploy/monitoring/prometheus-rule.yaml.tera" => "deploy/monitoring/prometheus-rule.yaml", Generated, Hashed),
    template!("deploy/monitoring/dashboard.yaml.tera" => "deploy/monitoring/dashboard.yaml", Generated, Hashed),
    template!("deploy/without-workload/kustomization.yaml.tera" => "deploy/without-workload/kustomization.yaml", Generated, Hashed),
    template!("deploy/local/kustomization.yaml.tera" => "deploy/local/kustomization.yaml", Generated, Hashed),
    template!("deploy/kustomization.yaml.tera" => "deploy/kustomization.yaml", Scaffold, Hashed),
    template!("deploy/deployment-patch.yaml.tera" => "deploy/deployment-patch.yaml", Scaffold, Hashed),
    template!("deploy/chart/Chart.yaml.tera" => "deploy/chart/Chart.yaml", Generated, Hashed),
    template!("deploy/chart/values.yaml.tera" => "deploy/chart/values.yaml", Generated, Hashed),
    template!("deploy/chart/values.schema.json.tera" => "deploy/chart/values.schema.json", Generated, Json),
    template!("deploy/chart/README.md.tera" => "deploy/chart/README.md", Generated, Markdown),
    template!("deploy/chart/templates/crd.yaml.tera" => "deploy/chart/templates/crd.yaml", Generated, Hashed, Imported, Dynamic),
    template!("deploy/chart/templates/rbac.yaml.tera" => "deploy/chart/templates/rbac.yaml", Generated, Hashed),
    template!("deploy/chart/templates/deployment.yaml.tera" => "deploy/chart/templates/deployment.yaml", Generated, Hashed),
    template!("deploy/chart/templates/pod-disruption-budget.yaml.tera" => "deploy/chart/templates/pod-disruption-budget.yaml", Generated, Hashed),
    template!("deploy/chart/templates/service.yaml.tera" => "deploy/chart/templates/service.yaml", Generated, Hashed),
    template!("deploy/chart/templates/webhooks.yaml.tera" => "deploy/chart/templates/webhooks.yaml", Generated, Hashed, needs Webhooks),
    template!("deploy/chart/templates/service-monitor.yaml.tera" => "deploy/chart/templates/service-monitor.yaml", Generated, Hashed),
    template!("deploy/chart/templates/prometheus-rule.yaml.tera" => "deploy/chart/templates/prometheus-rule.yaml", Generated, Hashed),
    template!("deploy/chart/templates/dashboard.yaml.tera" => "deploy/chart/templates/dashboard.yaml", Generated, Hashed),
    template!("deploy/values.yaml.tera" => "deploy/values.yaml", Scaffold, Hashed),
    template!("README.md.tera" => "README.md", Scaffold, Markdown),
    template!("OPERATOR.md.tera" => "OPERATOR.md", Generated, Markdown),
    template!("RELATIONS.md.tera" => "RELATIONS.md", Generated, Markdown),
    template!("error.rs.tera" => "src/error.rs", Generated, RustAsWritten),
    template!("lib.rs.tera" => "src/lib.rs", Generated, RustAsWritten),
    template!("main.rs.tera" => "src/main.rs", Generated, RustAsWritten),
    template!("settings.rs.tera" => "src/settings.rs", Generated, RustAsWritten),
    template!("webhook.rs.tera" => "src/webhook.rs", Generated, RustAsWritten, needs Webhooks),
    template!("certificates.rs.tera" => "src/certificates.rs", Generated, RustAsWritten, needs Webhooks),
    template!("admission.rs.tera" => "src/admission.rs", Scaffold, RustAsWritten, needs Admission),
    template!("conversion.rs.tera" => "src/conversion.rs", Generated, RustAsWritten, needs Conversion),
    template!("controller.rs.tera" => "src/controller.rs", Generated, RustAsWritten),
    template!("manifest.rs.tera" => "src/manifest.rs", Generated, RustAsWritten),
    template!("reconcile.rs.tera" => "src/reconcile.rs", Scaffold, RustAsWritten, Imported, Builtin, Dynamic, Derived),
    template!("reconcile_generic.rs.tera" => "src/reconcile.rs", Scaffold, RustAsWritten, Generic),
    template!("types.rs.tera" => "src/types.rs", Generated, Rust, Imported),
    template!("types_builtin.rs.tera" => "src/types.rs", Generated, RustAsWritten, Builtin, Generic),
    template!("types_derived.rs.tera" => "src/types.rs", Scaffold, RustAsWritten, Derived),
    template!("types_dynamic.rs.tera" => "src/types.rs", Generated, RustAsWritten, Dynamic),
    template!("crdgen.rs.tera" => "src/bin/crdgen.rs", Generated, RustAsWritten, Derived),
    template!("tests/cluster.rs.tera" => "tests/cluster.rs", Generated, RustAsWritten, needs Sample),
];

impl Template {
    /// Whether Helm renders this file as a Go template: everything under a chart's
    /// `templates/`.
    fn is_helm_template(&self) -> bool {
        self.output.starts_with("deploy/chart/templates/")
    }
}

/// Every path a template renders to, for any operator: with the vendored runtime's
/// ([`crate::vendor::is_vendored`]), what a journal of the writer may name.
pub fn outputs() -> impl Iterator<Item = &'static std::path::Path> {
    TEMPLATES
        .iter()
        .map(|template| std::path::Path::new(template.output))
}

/// The engine that renders `name`: that template and the partials it includes, parsed the
/// first time a run needs them and kept for the rest of the process, with autoescaping on and
/// an escape function that refuses raw text.
///
/// One engine per template rather than one for all: a run compiles only the templates its
/// archetype renders (about half of them), and workers compile theirs at the same time.
fn engine(name: &'static str) -> Result<&'static Tera> {
    type Engines = BTreeMap<&'static str, OnceLock<Result<Tera, Error>>>;
    static ENGINES: OnceLock<Engines> = OnceLock::new();
    let engines = ENGINES.get_or_init(|| {
        TEMPLATES
            .iter()
            .map(|template| (template.name, OnceLock::new()))
            .collect()
    });
    let engine = engines.get(name).ok_or_else(|| Error::Template {
        template: name.to_owned(),
        reason: "no such template in the plan table".to_owned(),
    })?;
    engine
        .get_or_init(|| guarded_engine(with_partials(name)))
        .as_ref()
        .map_err(|e| Error::Template {
            template: name.to_owned(),
            reason: e.to_string(),
        })
}

/// `name` and every partial it includes, directly or through another partial, with their
/// sources: what an engine for `name` must hold.
fn with_partials(name: &str) -> Vec<(&'static str, &'static str)> {
    let source = |wanted: &str| {
        operator_gen_templates::FILES
            .iter()
            .find(|(file, _)| *file == wanted)
            .copied()
    };
    let mut found: Vec<(&'static str, &'static str)> = source(name).into_iter().collect();
    let mut next = 0;
    while let Some(&(_, text)) = found.get(next) {
        for included in text.split("include \"").skip(1) {
            let Some((partial, _)) = included.split_once('"') else {
                continue;
            };
            if !found.iter().any(|(file, _)| *file == partial)
                && let Some(file) = source(partial)
            {
                found.push(file);
            }
        }
        next += 1;
    }
    found
}

/// A Tera instance holding `sources`, printing only safe strings.
fn guarded_engine<'a>(sources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Tera> {
    let mut tera = Tera::new();
    // All at once: Tera checks the whole set (inheritance, include cycles) after each call.
    let sources: Vec<(&str, &str)> = sources.into_iter().collect();
    tera.add_raw_templates(sources.iter().copied())
        .map_err(|e| {
            let names: Vec<&str> = sources.iter().map(|(name, _)| *name).collect();
            template_error(&names.join(", "), &e)
        })?;
    tera.set_escape_fn(refuse_raw_text);
    tera.autoescape_on([".tera"]);
    Ok(tera)
}

/// Renders every template for `operator` into a plan.
///
/// Files are rendered, parsed and formatted on all cores ([`crate::parallel`]); the plan
/// lists them in table order whatever finished first.
pub fn render(operator: &Operator) -> Result<Plan> {
    let context = Context::from_serialize(operator).map_err(|e| template_error("model", &e))?;
    let helm_context = helm_context(operator)?;
    let mut chosen: Vec<(usize, &Template)> = TEMPLATES
        .iter()
        .enumerate()
        .filter(|(_, template)| {
            (template.archetypes.is_empty() || template.archetypes.contains(&operator.archetype))
                && template.needs.met_by(operator)
        })
        .collect();
    // Longest first, so that no long file starts last: the formatted types, then the
    // others by the size of their template.
    chosen.sort_by_cached_key(|(_, template)| {
        let size = with_partials(template.name)
            .iter()
            .map(|(_, source)| source.len())
            .sum::<usize>();
        (template.format != Format::Rust, std::cmp::Reverse(size))
    });
    let rendered = crate::parallel::map(&chosen, |&(row, template)| {
        let context = match template.is_helm_template() {
            true => &helm_context,
            false => &context,
        };
        render_one(template, context, &operator.krate.provenance).map(|file| (row, file))
    });
    let mut files = rendered.into_iter().collect::<Result<Vec<_>>>()?;
    files.sort_by_key(|(row, _)| *row);
    let mut files: Vec<PlannedFile> = files.into_iter().map(|(_, file)| file).collect();
    if operator.krate.runtime == RuntimeSource::Vendored {
        files.extend(vendored(&operator.krate.provenance));
    }
    Ok(Plan::new(files)?.may_also_write(outputs()))
}

/// The context of a chart's templates: the model with every printable value a Go template
/// literal, so that no text of it can be an action when Helm renders the chart; then the
/// chart's [`HelmHooks`](crate::model::chart::HelmHooks), the generator's own actions; and in
/// place of every value that names the operator's namespace, the action that names the
/// release's ([`InRelease`](crate::model::chart::InRelease)).
fn helm_context(operator: &Operator) -> Result<Context> {
    use crate::model::chart::{HelmHooks, InRelease};
    let model =
        tera::Value::try_from_serializable(operator).map_err(|e| template_error("model", &e))?;
    let literal = crate::go_template::literal_context(&model);
    let in_release = InRelease::new(operator.krate.name.raw());
    let mut context = Context::new();
    for (key, value) in literal.into_map().into_iter().flatten() {
        let Some(name) = key.as_str().map(str::to_owned) else {
            continue;
        };
        let value = match name.as_str() {
            "chart" => with(
                value,
                [("helm", tera::Value::from_serializable(&HelmHooks::new()))],
            ),
            "deploy" => with(
                value,
                [(
                    "namespace",
                    tera::Value::from_serializable(&in_release.namespace),
                )],
            ),
            "webhooks" => with(
                value,
                [
                    (
                        "dns_names",
                        tera::Value::from_serializable(&in_release.dns_names),
                    ),
                    (
                        "inject_ca_from",
                        tera::Value::from_serializable(&in_release.inject_ca_from),
                    ),
                    (
                        "match_condition",
                        tera::Value::from_serializable(&in_release.match_condition),
                    ),
                ],
            ),
            _ => value,
        };
        context.insert_value(name, value);
    }
    Ok(context)
}

/// `value`, when it is a map, with `entries` set in it; otherwise (an operator without
/// webhooks has none) as it is.
fn with<const N: usize>(
    value: tera::Value,
    entries: [(&'static str, tera::Value); N],
) -> tera::Value {
    let Some(map) = value.as_map() else {
        return value;
    };
    let mut map = map.clone();
    for (key, entry) in entries {
        map.insert(key.into(), entry);
    }
    tera::Value::from(map)
}

/// A plan of no files that may have written any template's output: what a recovery of a
/// crate folder trusts a journal to name.
pub fn any_output() -> Plan {
    Plan::default().may_also_write(outputs())
}

/// The vendored runtime's files ([`crate::vendor`]): each the runtime's own text under a
/// generated header, so that an edit by hand is found as in any generated file.
fn vendored(provenance: &Provenance) -> impl Iterator<Item = PlannedFile> + '_ {
    let note = format!(
        "A copy of operator-gen-runtime {}, which Cargo.toml names by path; gen replaces it, so do not edit it.",
        operator_gen_templates::RUNTIME_VERSION
    );
    crate::vendor::files().map(move |(path, body)| {
        let format = if path.ends_with(".rs") {
            Format::RustAsWritten
        } else if path.ends_with(".md") {
            Format::Markdown
        } else {
            Format::Hashed
        };
        PlannedFile {
            contents: header_saying(format, provenance, &note, body),
            path: PathBuf::from(path),
            ownership: Ownership::Generated,
        }
    })
}

/// One template's file, finished and with its header.
fn render_one(
    template: &Template,
    context: &Context,
    provenance: &Provenance,
) -> Result<PlannedFile> {
    let rendered = engine(template.name)?
        .render(template.name, context)
        .map_err(|e| template_error(template.name, &e))?;
    let body = finish(template, rendered)?;
    let contents = match template.ownership {
        Ownership::Generated => with_header(template.format, provenance, &body),
        Ownership::Scaffold => body,
    };
    Ok(PlannedFile {
        path: PathBuf::from(template.output),
        contents,
        ownership: template.ownership,
    })
}

/// Tera's escape function, which it calls for every printed value that is not a safe string.
/// Every printable model value is safe (see [`crate::text`]), so reaching here means a
/// template printed raw text: refuse, naming the start of it.
fn refuse_raw_text(text: &str, _: &mut dyn std::io::Write) -> std::io::Result<()> {
    let start: String = text.chars().take(40).collect();
    Err(std::io::Error::other(format!(
        "a template printed text that is not an escaped value ({:?}); print a typed form such as `.rs`, `.yaml` or `.comment`",
        start
    )))
}

fn template_error(template: &str, error: &dyn std::error::Error) -> Error {
    // Tera nests the useful part of an error in its sources.
    let mut reason = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        reason = format!("{reason}: {inner}");
        source = inner.source();
    }
    Error::Template {
        template: template.to_owned(),
        reason,
    }
}

fn finish(template: &Template, rendered: String) -> Result<String> {
    let parse = |code: &str| {
        syn::parse_file(code).map_err(|e| Error::InvalidRust {
            file: template.output.to_owned(),
            reason: format!("{e} at line {}", e.span().start().line),
        })
    };
    Ok(match template.format {
        Format::Rust => space_items(&prettyplease::unparse(&parse(&rendered)?)),
        Format::RustAsWritten => {
            parse(&rendered)?;
            rendered
        }
        Format::Hashed | Format::Markdown => rendered,
        Format::Json => {
            let object = serde_json::from_str::<serde_json::Value>(&rendered)
                .map_err(|e| format!("renders JSON that does not parse: {e}"))
                .and_then(
                    |value| match value.is_object() && rendered.starts_with("{\n") {
                        true => Ok(rendered),
                        false => Err(
                            "renders JSON that is not an object opening on a line of its \
                                  own, which the header's keys go after"
                                .to_owned(),
                        ),
                    },
                );
            object.map_err(|reason| Error::Template {
                template: template.output.to_owned(),
                reason,
            })?
        }
    })
}

fn with_header(format: Format, provenance: &Provenance, body: &str) -> String {
    header_saying(
        format,
        provenance,
        "Do not edit: logic goes in src/reconcile.rs, relations in operator.yaml.",
        body,
    )
}

/// `body` under the generated header, whose first line says `note` after the mark.
fn header_saying(format: Format, provenance: &Provenance, note: &str, body: &str) -> String {
    let comment = match format {
        Format::Rust | Format::RustAsWritten => "//",
        Format::Hashed => "#",
        // One HTML comment per line, so the header renders as nothing.
        Format::Markdown => MARKDOWN_COMMENT,
        Format::Json => return json_header_saying(provenance, note, body),
    };
    let close = comment_close(comment);
    let mut regenerate = provenance.regenerate.comment();
    if format == Format::Markdown {
        // A path that holds `-->` or `--!>` must not end the comment early.
        regenerate = regenerate.replace("-->", "-- >").replace("--!>", "--! >");
    }
    format!(
        "{comment} @generated by operator-gen {}. {note}{close}\n\
         {comment} Regenerate with `{}` in this crate's folder.{close}\n{}\n{body}",
        provenance.generator_version,
        regenerate,
        checksum_line(comment, body)
    )
}

/// `body`, a JSON object, with the header as its first two keys: `$comment` (which JSON Schema
/// reserves for comments) on the first line, where every generated file says it is one, and
/// the checksum of the rest of the object on the second.
fn json_header_saying(provenance: &Provenance, note: &str, body: &str) -> String {
    // `finish` made sure the body is an object opening with `{` on a line of its own.
    let rest = body.strip_prefix("{\n").unwrap_or(body);
    let comment = serde_json::Value::from(format!(
        "{GENERATED_MARK} {}. {note} Regenerate with `{}` in this crate's folder.",
        provenance.generator_version,
        provenance.regenerate.comment(),
    ));
    format!(
        "{{ \"$comment\": {comment},\n{}\n{rest}",
        checksum_line(JSON_CHECKSUM_COMMENT, rest)
    )
}

/// prettyplease puts items back to back; this restores the blank line people expect between
/// items (and after the module docs), leaving struct fields and statements alone.
fn space_items(code: &str) -> String {
    const ITEM_STARTS: &[&str] = &[
        "///",
        "#[",
        "pub ",
        "pub(",
        "fn ",
        "async fn ",
        "impl",
        "mod ",
        "const ",
        "static ",
        "type ",
        "struct ",
        "enum ",
        "trait ",
        "use ",
        "unsafe ",
        "macro_rules!",
    ];
    let mut out = String::with_capacity(code.len() + code.len() / 16);
    let mut previous: Option<&str> = None;
    for line in code.lines() {
        if let Some(prev) = previous {
            let indent = |l: &str| l.len() - l.trim_start().len();
            let (p, l) = (prev.trim_start(), line.trim_start());
            // A comment line that ends like code (`/// fn f() {}`) ends nothing.
            let ends_code = !p.starts_with("//") && (p.ends_with('}') || p.ends_with(';'));
            let item_follows = indent(prev) == indent(line)
                && (ends_code || (p.starts_with("//!") && !l.starts_with("//!")))
                && ITEM_STARTS.iter().any(|start| l.starts_with(start));
            let use_group = p.starts_with("use ")
                && (l.starts_with("use ") || l.starts_with("pub use "))
                || p.starts_with("pub use ") && l.starts_with("pub use ");
            if item_follows && !use_group {
                out.push('\n');
            }
        }
        out.push_str(line);
        out.push('\n');
        previous = Some(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        manifest::Manifest,
        model::{PrimaryInput, analyze},
        text::Text,
    };

    /// Renders `template` (named like the real ones) with `context` on a guarded engine.
    fn render_one(template: &str, context: &impl serde::Serialize) -> Result<String> {
        let tera = guarded_engine([("t.rs.tera", template)])?;
        let context = Context::from_serialize(context).map_err(|e| template_error("model", &e))?;
        tera.render("t.rs.tera", &context)
            .map_err(|e| template_error("t.rs.tera", &e))
    }

    #[derive(serde::Serialize)]
    struct Model {
        raw: String,
        text: Text,
        count: u32,
    }

    fn model() -> Model {
        Model {
            raw: "\"); std::process::exit(1); (\"".to_owned(),
            text: Text::from("a\"b\nc"),
            count: 3,
        }
    }

    #[test]
    fn a_raw_string_in_the_model_cannot_be_printed() {
        let err = render_one("const X: &str = \"{{ raw }}\";", &model()).unwrap_err();
        assert!(err.to_string().contains("not an escaped value"), "{err}");
        let literal = render_one("{{ \"literal\" }}", &model()).unwrap_err();
        assert!(
            literal.to_string().contains("not an escaped value"),
            "{literal}"
        );
    }

    #[test]
    fn text_prints_only_through_an_escaped_form() {
        let whole = render_one("{{ text }}", &model()).unwrap_err();
        assert!(
            whole.to_string().contains("not an escaped value"),
            "{whole}"
        );
        let code = render_one(
            "const X: &str = {{ text.rs }}; // {{ text.comment }} x{{ count }}",
            &model(),
        )
        .unwrap();
        assert_eq!(code, "const X: &str = \"a\\\"b\\nc\"; // a\"b\\u{a}c x3");
        let missing = render_one("{{ text.plain }}", &model());
        assert!(missing.is_err(), "text that is not inert has no plain form");
    }

    /// The filters templates may use: they count or pick, and never change text. A filter
    /// that rewrites an escaped value (`replace`, `upper`, `safe`) could undo its escaping,
    /// and Tera keeps the result marked safe.
    const ALLOWED_FILTERS: &[&str] = &["length", "first"];

    /// `source` without its `{% raw %}` blocks, which Tera prints as they are: the Helm
    /// actions of a chart's templates, which are not Tera's tags.
    fn without_raw(source: &str) -> String {
        let raw = regex::Regex::new(r"(?s)\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}")
            .expect("a valid pattern");
        raw.replace_all(source, "").into_owned()
    }

    /// The filters used inside `{{ }}` and `{% %}` tags of `source`.
    fn filters(source: &str) -> Vec<String> {
        let source = without_raw(source);
        let mut found = Vec::new();
        let mut rest = source.as_str();
        while let Some(start) = rest.find(['{']) {
            rest = &rest[start + 1..];
            let close = match rest.chars().next() {
                Some('{') => "}}",
                Some('%') => "%}",
                _ => continue,
            };
            let Some(end) = rest.find(close) else { break };
            for piece in rest[1..end].split('|').skip(1) {
                let name: String = piece
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                found.push(name);
            }
            rest = &rest[end..];
        }
        found
    }

    #[test]
    fn templates_use_no_filter_that_rewrites_text() {
        for &(name, source) in operator_gen_templates::FILES {
            for filter in filters(source) {
                assert!(
                    ALLOWED_FILTERS.contains(&filter.as_str()),
                    "{name} uses the filter `{filter}`; templates print typed values as they are"
                );
            }
            let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(
                !compact.contains("{%autoescape"),
                "{name} turns autoescaping off"
            );
        }
        assert_eq!(
            filters("{{ a | upper }} |x| {% if b|safe %}"),
            ["upper", "safe"]
        );
        assert_eq!(
            filters("{%- raw %}{{ .Values.x | quote }}{%- endraw %}{{ c | upper }}"),
            ["upper"]
        );
    }

    /// Whether a Rust template glues a printed value to letters, digits or `_` on either side:
    /// an identifier composed in the template (`{{ kind }}Spec`), which the model's naming
    /// should have decided and de-duplicated instead.
    fn composes_identifier(source: &str) -> Option<String> {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let mut rest = source;
        while let Some(start) = rest.find("{{") {
            let before = rest[..start].chars().next_back();
            let Some(end) = rest[start..].find("}}") else {
                break;
            };
            let end = start + end + 2;
            let after = rest[end..].chars().next();
            // Generic parameters and arguments (`<K: Kind>`, `<K>`) open with `<` or are
            // empty, so they close a name rather than compose one (see `model::reconciled`).
            let printed = rest[start + 2..end - 2].trim_matches(['-', ' ']);
            let generics = GENERIC_ARGUMENTS.contains(&printed);
            if (word(before) && !generics) || word(after) {
                let line_start = rest[..start].rfind('\n').map_or(0, |i| i + 1);
                let line_end = rest[end..].find('\n').map_or(rest.len(), |i| end + i);
                return Some(rest[line_start..line_end].trim().to_owned());
            }
            rest = &rest[end..];
        }
        None
    }

    /// The model's generic parameters and arguments, as templates print them (`r` is
    /// `controller.reconciled`).
    const GENERIC_ARGUMENTS: &[&str] = &[
        "controller.reconciled.params",
        "controller.reconciled.args",
        "r.params",
        "r.args",
        "kind.args",
    ];

    #[test]
    fn no_rust_template_composes_an_identifier() {
        for &(name, source) in operator_gen_templates::FILES {
            if name.ends_with(".rs.tera") {
                assert_eq!(composes_identifier(source), None, "{name}");
            }
        }
        assert_eq!(
            composes_identifier("a {{ x }} b\npub struct {{ kind }}Spec {"),
            Some("pub struct {{ kind }}Spec {".to_owned())
        );
        assert_eq!(
            composes_identifier("let {{ x }}_events = 1;").as_deref(),
            Some("let {{ x }}_events = 1;")
        );
        assert_eq!(
            composes_identifier("fn apply{{ r.params }}(obj: Primary{{ r.args }})"),
            None
        );
    }

    /// The names a template's tags start an expression with, other than those it binds
    /// itself (`for x in`, `set x`) and Tera's own words.
    fn names_read(source: &str) -> Vec<String> {
        let source = without_raw(source);
        let source = source.as_str();
        const TERA: &[&str] = &[
            "loop", "true", "false", "not", "and", "or", "in", "is", "if", "elif", "else", "endif",
            "for", "endfor", "include", "set", "raw", "endraw",
        ];
        let tag = regex::Regex::new(r"(?s)\{\{.*?\}\}|\{%.*?%\}").expect("a valid pattern");
        let bound = regex::Regex::new(r"\{%-?\s*(?:for|set)\s+(\w+)").expect("a valid pattern");
        let quoted =
            regex::Regex::new(r#""[^"]*"|'[^']*'|\|\s*\w+|\bis\s+\w+"#).expect("a valid pattern");
        let name = regex::Regex::new(r"(^|[^\w.])([A-Za-z_]\w*)").expect("a valid pattern");
        let own: Vec<&str> = bound
            .captures_iter(source)
            .map(|c| c.get(1).map_or("", |m| m.as_str()))
            .collect();
        let mut read = Vec::new();
        for found in tag.find_iter(source) {
            let text = quoted.replace_all(found.as_str(), " ");
            for captured in name.captures_iter(&text) {
                let word = captured.get(2).map_or("", |m| m.as_str());
                if !TERA.contains(&word) && !own.contains(&word) && !read.iter().any(|r| r == word)
                {
                    read.push(word.to_owned());
                }
            }
        }
        read
    }

    /// The operator of the test CRD with `manifest`.
    fn imported(manifest: &str) -> Operator {
        operator_of(&test_crd(false), manifest)
    }

    /// The test CRD as a primary, typed by kopium or, `dynamic`, untyped.
    fn test_crd(dynamic: bool) -> PrimaryInput {
        use crate::crd_document::{Selection, parse_all, select, tests::CRD};
        let documents = parse_all("w.yaml", CRD.as_bytes()).expect("the test CRD parses");
        let selected = select("w.yaml", documents, &Selection::default()).expect("one CRD");
        PrimaryInput::Crd {
            selected: Box::new(selected),
            dynamic,
        }
    }

    /// The operator of `input` with `manifest`.
    fn operator_of(input: &PrimaryInput, manifest: &str) -> Operator {
        let manifest = Manifest::parse("operator.yaml", manifest).expect("a valid manifest");
        let analysis = analyze("operator.yaml", &manifest, input, &[], Default::default());
        analysis.expect("a model").operator
    }

    #[test]
    fn lib_rs_declares_every_rendered_module_with_its_owner() {
        let kind = |name| crate::k8s_catalog::find(name).expect("a built-in kind");
        let inputs = [
            test_crd(false),
            test_crd(true),
            PrimaryInput::Builtin(kind("Deployment")),
            PrimaryInput::Generic(vec![kind("Deployment"), kind("ConfigMap")]),
        ];
        let manifests = ["", "webhooks: {validating: true, mutating: true}"];
        for (input, manifest) in inputs.iter().flat_map(|i| manifests.map(|m| (i, m))) {
            let operator = operator_of(input, manifest);
            let plan = render(&operator).expect("renders");
            let rendered: Vec<(String, bool)> = plan
                .files
                .iter()
                .filter_map(|file| {
                    let name = file
                        .path
                        .strip_prefix("src")
                        .ok()?
                        .to_str()?
                        .strip_suffix(".rs")?;
                    let module = name.trim_start_matches('/');
                    let generated = file.ownership == Ownership::Generated;
                    (!matches!(module, "lib" | "main") && !module.contains('/'))
                        .then(|| (module.to_owned(), generated))
                })
                .collect();
            let mut declared: Vec<(String, bool)> = operator
                .krate
                .modules
                .iter()
                .map(|module| (module.name.as_str().to_owned(), module.generated))
                .collect();
            declared.sort();
            assert_eq!(
                declared, rendered,
                "{:?} with {manifest:?}",
                operator.archetype
            );
        }
    }

    /// Tera reads a name it does not know as false in an `if` and as nothing in a `for`, so a
    /// template that names a part the model does not have renders as if the part were empty.
    #[test]
    fn every_name_a_template_reads_is_a_part_of_the_model() {
        let model = serde_json::to_value(imported("")).expect("serializes");
        let parts: Vec<&String> = model.as_object().expect("an object").keys().collect();
        for &(template, source) in operator_gen_templates::FILES {
            for name in names_read(source) {
                assert!(
                    parts.contains(&&name),
                    "{template} reads `{name}`, which is not a part of the model: {parts:?}"
                );
            }
        }
        let stale = names_read("{% for x in owns %}{{ x.name.rs }}{% endfor %}{% if crate.name %}");
        assert_eq!(stale, ["owns", "crate"]);
        let helm = names_read("{% raw %}{{ .Values.replicas }}{% endraw %}{{ chart.helm.end }}");
        assert_eq!(helm, ["chart"]);
    }

    /// A chart's templates and the hooks read exactly the values the chart declares: a value
    /// read but not declared would render as nothing, whatever a user set (the schema refuses
    /// it), and one declared but not read would do nothing.
    #[test]
    fn a_chart_reads_every_value_it_declares_and_no_other() {
        use crate::model::chart::{Features, HelmHooks, value_paths};
        let all = Features {
            sharding: true,
            webhooks: true,
            admission: true,
            crd: true,
        };
        let declared = value_paths(all);
        let value = regex::Regex::new(r"\.Values\.([A-Za-z][\w.]*\w)").expect("a valid pattern");
        let hooks = serde_json::to_string(&HelmHooks::new()).expect("serializes");
        let sources = operator_gen_templates::FILES
            .iter()
            .filter(|(name, _)| name.starts_with("deploy/"))
            .map(|(_, source)| *source)
            .chain([hooks.as_str()]);
        let mut read = std::collections::BTreeSet::new();
        for source in sources {
            for captured in value.captures_iter(source) {
                read.insert(captured[1].to_owned());
            }
        }
        let declared: std::collections::BTreeSet<String> = declared.into_iter().collect();
        assert_eq!(read, declared);
    }

    #[test]
    fn every_output_has_a_template_and_every_template_an_output_or_includer() {
        let embedded: Vec<&str> = operator_gen_templates::FILES.iter().map(|f| f.0).collect();
        for template in TEMPLATES {
            assert!(
                embedded.contains(&template.name),
                "{} is not embedded",
                template.name
            );
        }
        for name in embedded {
            let rendered = TEMPLATES.iter().any(|t| t.name == name);
            let included = operator_gen_templates::FILES
                .iter()
                .any(|(_, text)| text.contains(&format!("include \"{name}\"")));
            assert!(
                rendered || included,
                "{name} is neither rendered nor included"
            );
        }
    }

    #[test]
    fn each_engine_holds_its_template_and_every_partial_it_includes() {
        let names: Vec<&str> = with_partials("types_derived.rs.tera")
            .iter()
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(names, ["types_derived.rs.tera", "_types_versions.rs.tera"]);
        assert_eq!(with_partials("types.rs.tera").len(), 1);
        // Every template compiles with only what it includes.
        for template in TEMPLATES {
            engine(template.name).unwrap_or_else(|e| panic!("{}: {e}", template.name));
        }
        assert!(engine("missing.rs.tera").is_err());
    }

    #[test]
    fn a_json_file_carries_its_header_as_keys_and_stays_json_its_checksum_pristine() {
        let operator = imported("");
        let provenance = &operator.krate.provenance;
        let body = "{\n  \"type\": \"object\"\n}\n";
        let file = header_saying(Format::Json, provenance, "Do not edit.", body);
        let value: serde_json::Value = serde_json::from_str(&file).expect("still JSON");
        assert_eq!(value["type"], "object");
        let comment = value["$comment"].as_str().expect("a comment key");
        assert!(comment.starts_with(GENERATED_MARK), "{comment}");
        assert!(
            file.lines()
                .next()
                .is_some_and(|line| line.contains(GENERATED_MARK))
        );
        assert!(crate::write_plan::is_pristine(&file), "{file}");
        let edited = file.replace("\"object\"", "\"array\"");
        assert!(!crate::write_plan::is_pristine(&edited), "{edited}");
    }

    #[test]
    fn items_get_blank_lines_and_fields_do_not() {
        let file: syn::File = syn::parse_str(
            "//! Docs.\nuse a::b;\nuse c::d;\n/// S.\npub struct S { pub a: u8, pub b: u8 }\nimpl S { fn f(&self) { let x = 1; let y = 2; } fn g() {} }",
        )
        .unwrap();
        let spaced = space_items(&prettyplease::unparse(&file));
        assert_eq!(
            spaced,
            "//! Docs.\n\nuse a::b;\nuse c::d;\n\n/// S.\npub struct S {\n    pub a: u8,\n    pub b: u8,\n}\n\nimpl S {\n    fn f(&self) {\n        let x = 1;\n        let y = 2;\n    }\n\n    fn g() {}\n}\n"
        );
        syn::parse_file(&spaced).unwrap();
    }

    #[test]
    fn a_doc_line_that_ends_like_code_keeps_its_comment_whole() {
        let code = "/// Example: `fn f() {}`\n/// fn main() {}\n/// More.\npub struct S;\n";
        assert_eq!(
            space_items(code),
            code,
            "no blank line inside or after the docs"
        );
    }
}
