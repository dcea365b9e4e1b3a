//! `deploy/chart/`, the Helm chart: its values, each declared once here with its type, default
//! and purpose, from which `values.yaml`, `values.schema.json` and the chart README's table are
//! all written; the CRD as the chart installs it; and [`HelmHooks`], the Helm conditions the
//! templates shared with the kustomize base print only when they render into the chart.
//!
//! The chart's objects are not a second copy of the base: its templates include the base's
//! (see [`crate::go_template`] for how the model's text is kept out of Helm's template syntax),
//! and only the Deployment, which the values reach into most, has a template of its own. With
//! the default values, `helm template` gives the base's objects; `cargo xtask charts` checks
//! that object by object.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    go_template,
    text::{Constant, GoTemplate, JsonDocument, Text, YamlDocument},
};

/// The chart, as its files print it.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// `values.yaml`: every value with its default, under comments that say what it does.
    pub values_yaml: YamlDocument,
    /// `values.schema.json`: every value's type, so `helm install --set replicas=abc` fails
    /// with helm's own error naming the value.
    pub values_schema: JsonDocument,
    /// The chart README's table: one row per value.
    pub values_table: Vec<ValueRow>,
    /// The CRD the chart installs (imported and dynamic operators), kept on uninstall.
    pub crd_yaml: Option<YamlDocument>,
    /// The release the README's commands name: the crate's name, cut to the 53 characters
    /// helm allows a release name.
    pub release: Text,
    /// The command that installs the chart, creating the namespace when it is the operator's
    /// own.
    pub install: Vec<Text>,
    /// How the objects a kustomize overlay applied pass to the release and back.
    pub switching: Switching,
    /// The Helm conditions shared templates print in the chart; absent from the model, and
    /// added only to the chart's context, after its text was made literal ([`HelmHooks`]).
    pub helm: Option<HelmHooks>,
}

/// How the objects a kustomize overlay applied pass to the release and back, as OPERATOR.md
/// tells it. helm installs over an existing object only when it carries helm's label and the
/// release's annotations, or it fails on the first (the ServiceAccount); and after `helm
/// uninstall` keeps the CRD, helm's field manager still holds its fields, so a CRD that
/// changed since conflicts on `.spec.versions` when `deploy/` is applied again.
#[derive(Debug, Clone, Serialize)]
pub struct Switching {
    /// For each overlay a user runs from, the commands that hand its objects to the release.
    pub to_helm: Vec<Adoption>,
    /// The commands that take the objects back into `deploy/` once the release is gone.
    pub to_kustomize: Vec<Text>,
}

/// The commands that mark the objects of `overlay` as the release's, then install the chart
/// over them.
#[derive(Debug, Clone, Serialize)]
pub struct Adoption {
    /// `deploy/local/` (after a local run) or `deploy/`.
    pub overlay: Text,
    pub commands: Vec<Text>,
}

/// The overlays a user may have applied before installing the chart.
const OVERLAYS: [&str; 2] = ["deploy/local/", "deploy/"];

/// One row of the chart README's table of values.
#[derive(Debug, Clone, Serialize)]
pub struct ValueRow {
    pub path: Text,
    pub kind: Text,
    pub default: Text,
    /// What it does: the generator's own words.
    pub doc: Constant,
}

/// What decides which values a chart has.
#[derive(Debug, Clone, Copy)]
pub struct Features {
    pub sharding: bool,
    pub webhooks: bool,
    /// Admission webhooks, whose configurations the chart installs.
    pub admission: bool,
    /// Whether the chart installs the CRD: the operator's CRD is one it was given.
    pub crd: bool,
}

/// A value's type, as the schema states it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Boolean,
    Integer {
        minimum: u32,
        maximum: u32,
    },
    String,
    /// An image tag, which `--set` reads as a number when it is digits (`20260611`).
    Tag,
    /// An `https://` URL without a path, or nothing.
    BaseUrl,
    OneOf(&'static [&'static str]),
    /// A container's `resources`, which the chart prints whole.
    Resources,
}

/// One value: where it is, its type, its default and what it does.
struct Setting {
    path: &'static [&'static str],
    kind: Kind,
    default: Value,
    doc: &'static str,
}

/// The values of a chart, in `values.yaml`'s order. The chart's templates read exactly these
/// (a test holds them to it), and with these defaults render the kustomize base.
fn settings(crate_name: &str, features: Features) -> Vec<Setting> {
    let mut settings = vec![
        Setting {
            path: &["image", "repository"],
            kind: Kind::String,
            default: json!(crate_name),
            doc: "The operator's image, built from the crate's Dockerfile and pushed where the \
                  cluster pulls from.",
        },
        Setting {
            path: &["image", "tag"],
            kind: Kind::Tag,
            default: json!(super::CRATE_VERSION),
            doc: "The image's tag: the crate's version by default, which `operator-gen image` \
                  tags it with. `latest` would make the kubelet pull on every start, and an \
                  image loaded into the node (kind load, ctr import) would never start.",
        },
        Setting {
            path: &["image", "pullPolicy"],
            kind: Kind::OneOf(&["IfNotPresent", "Always", "Never"]),
            default: json!("IfNotPresent"),
            doc: "When the kubelet pulls the image: IfNotPresent runs one loaded into the node \
                  or pulled before; Always asks the registry at every start.",
        },
        Setting {
            path: &["replicas"],
            kind: Kind::Integer {
                minimum: 0,
                maximum: 1000,
            },
            default: json!(if features.sharding { 3 } else { 2 }),
            doc: if features.sharding {
                "Replicas of the operator. With sharding each reconciles its own shard of the \
                 primaries; the one that leads the operator's Lease also places them."
            } else {
                "Replicas of the operator. With leader election one of them reconciles at a \
                 time and the others wait to take over."
            },
        },
        Setting {
            path: &["leaderElection"],
            kind: Kind::Boolean,
            default: json!(true),
            doc: "Take the operator's Lease before reconciling (LEADER_ELECTION), so that of \
                  several replicas one reconciles. Without it, every replica reconciles every \
                  object.",
        },
    ];
    if features.sharding {
        settings.push(Setting {
            path: &["sharding"],
            kind: Kind::Boolean,
            default: json!(true),
            doc: "Split the primaries among the replicas (SHARDING), each reconciling its own \
                  shard.",
        });
    }
    settings.extend([
        Setting {
            path: &["logFormat"],
            kind: Kind::OneOf(&["json", "pretty"]),
            default: json!("json"),
            doc: "LOG_FORMAT: json, one object per line for log pipelines, or pretty, for people.",
        },
        Setting {
            path: &["logLevel"],
            kind: Kind::String,
            default: json!("info"),
            doc: "RUST_LOG: a tracing filter, such as info or info,kube=debug.",
        },
        Setting {
            path: &["metricsPort"],
            kind: Kind::Integer {
                minimum: 1,
                maximum: 65535,
            },
            default: json!(8080),
            doc: "The container port of /metrics, /healthz and /readyz (METRICS_ADDR). The \
                  Service and the probes reach it by its name, http.",
        },
        Setting {
            path: &["resources"],
            kind: Kind::Resources,
            default: json!({
                "requests": {"cpu": "50m", "memory": "64Mi"},
                "limits": {"memory": "256Mi"},
            }),
            doc: "The operator container's resource requests and limits.",
        },
    ]);
    if features.crd {
        settings.push(Setting {
            path: &["crds", "install"],
            kind: Kind::Boolean,
            default: json!(true),
            doc: "Install the CRD with the chart, and upgrade it with the chart. Uninstalling \
                  keeps it (helm.sh/resource-policy: keep): deleting a CRD deletes every \
                  object of its kind.",
        });
    }
    if features.webhooks {
        settings.push(Setting {
            path: &["webhooks", "certificates"],
            kind: Kind::OneOf(&[SELF_MANAGED, CERT_MANAGER]),
            default: json!(SELF_MANAGED),
            doc: "Who issues the webhooks' serving certificate: the operator itself \
                  (self-managed), or cert-manager, from a Certificate and a self-signed Issuer \
                  the chart installs, with its CA injected into the webhook configurations. \
                  cert-manager must be in the cluster for that.",
        });
    }
    if features.admission {
        settings.push(Setting {
            path: &["webhooks", "url"],
            kind: Kind::BaseUrl,
            default: json!(""),
            doc: "Where the API server calls the admission webhooks instead of the Service: a \
                  base URL such as https://127.0.0.1:8443 for an operator run outside the \
                  cluster (cargo run), as deploy/local/ has it. Empty: the Service.",
        });
    }
    settings.extend([
        Setting {
            path: &["monitoring", "serviceMonitor"],
            kind: Kind::Boolean,
            default: json!(false),
            doc: "A ServiceMonitor for the operator's metrics (needs prometheus-operator).",
        },
        Setting {
            path: &["monitoring", "prometheusRule"],
            kind: Kind::Boolean,
            default: json!(false),
            doc: "A PrometheusRule of alerts about the operator (needs prometheus-operator).",
        },
        Setting {
            path: &["monitoring", "dashboard"],
            kind: Kind::Boolean,
            default: json!(false),
            doc: "A ConfigMap with the operator's Grafana dashboard, for Grafana's dashboard \
                  sidecar.",
        },
    ]);
    settings
}

/// `webhooks.certificates`' two modes, as in `deploy/base/` and `deploy/cert-manager/`.
const SELF_MANAGED: &str = "self-managed";
const CERT_MANAGER: &str = "cert-manager";

/// The chart of an operator called `crate_name`, run in `namespace` (its own when
/// `own_namespace`), whose CRD, when it installs one, is `crd`.
pub fn chart(
    crate_name: &str,
    namespace: &str,
    own_namespace: bool,
    features: Features,
    crd: Option<&CustomResourceDefinition>,
) -> Result<Chart, serde_saphyr::ser::Error> {
    let settings = settings(crate_name, features);
    let crd_yaml = crd
        .map(|crd| YamlDocument::new(&kept_on_uninstall(crd)))
        .transpose()?;
    Ok(Chart {
        values_yaml: values_yaml(&settings)?,
        values_schema: JsonDocument::new(&schema(crate_name, &settings)),
        values_table: settings.iter().map(row).collect(),
        crd_yaml,
        release: Text::new(release(crate_name)),
        install: install(&release(crate_name), namespace, own_namespace),
        switching: switching(&release(crate_name), namespace, own_namespace),
        helm: None,
    })
}

/// The longest release name helm takes: its Secret's name with helm's prefix and suffix must
/// still be a valid label.
const MAX_RELEASE_NAME: usize = 53;

/// The release of `crate_name`'s chart: the crate's name, a DNS label, cut to
/// [`MAX_RELEASE_NAME`] without a trailing `-`.
fn release(crate_name: &str) -> String {
    let cut: String = crate_name.chars().take(MAX_RELEASE_NAME).collect();
    cut.trim_end_matches('-').to_owned()
}

/// The commands that install the chart as `release` into `namespace`, creating it when it is
/// the operator's own.
fn install(release: &str, namespace: &str, own_namespace: bool) -> Vec<Text> {
    let create = if own_namespace {
        " --create-namespace"
    } else {
        ""
    };
    vec![Text::new(format!(
        "helm install {release} deploy/chart --namespace {namespace}{create} -f deploy/values.yaml"
    ))]
}

/// How `release` in `namespace` takes over what each overlay applied, and gives it back.
fn switching(release: &str, namespace: &str, own_namespace: bool) -> Switching {
    let to_helm = OVERLAYS
        .iter()
        .map(|overlay| {
            let mut commands = vec![
                Text::new(format!(
                    "kubectl label --overwrite -k {overlay} app.kubernetes.io/managed-by=Helm"
                )),
                Text::new(format!(
                    "kubectl kustomize {overlay} | kubectl annotate --overwrite -f - \
                     meta.helm.sh/release-name={release} meta.helm.sh/release-namespace={namespace}"
                )),
            ];
            commands.extend(install(release, namespace, own_namespace));
            Adoption {
                overlay: Text::new(*overlay),
                commands,
            }
        })
        .collect();
    let to_kustomize = vec![
        Text::new(format!("helm uninstall {release} --namespace {namespace}")),
        Text::new("kubectl apply --server-side --force-conflicts -k deploy/"),
    ];
    Switching {
        to_helm,
        to_kustomize,
    }
}

/// `crd` with the annotation that has `helm uninstall` leave it.
fn kept_on_uninstall(crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut crd = crd.clone();
    crd.metadata
        .annotations
        .get_or_insert_default()
        .insert("helm.sh/resource-policy".to_owned(), "keep".to_owned());
    crd
}

/// `values.yaml`: the settings as nested keys, each under its comment.
fn values_yaml(settings: &[Setting]) -> Result<YamlDocument, serde_saphyr::ser::Error> {
    let mut yaml = String::new();
    let mut previous: &[&str] = &[];
    for setting in settings {
        let shared = previous
            .iter()
            .zip(setting.path)
            .take_while(|(a, b)| a == b)
            .count()
            .min(setting.path.len() - 1);
        if shared == 0 && !yaml.is_empty() {
            // A blank line between top-level values.
            yaml.push('\n');
        }
        for (depth, key) in setting
            .path
            .iter()
            .enumerate()
            .take(setting.path.len() - 1)
            .skip(shared)
        {
            yaml.push_str(&format!("{}{key}:\n", "  ".repeat(depth)));
        }
        let depth = setting.path.len() - 1;
        let indent = "  ".repeat(depth);
        for line in wrapped(setting.doc, 94 - indent.len()) {
            yaml.push_str(&format!("{indent}# {line}\n"));
        }
        let key = setting.path[depth];
        let value = YamlDocument::new(&setting.default)?;
        let value = value.as_str().trim_end();
        match setting.kind {
            Kind::Resources => {
                yaml.push_str(&format!("{indent}{key}:\n"));
                for line in value.lines() {
                    yaml.push_str(&format!("{indent}  {line}\n"));
                }
            }
            _ => yaml.push_str(&format!("{indent}{key}: {value}\n")),
        }
        previous = setting.path;
    }
    // The template ends the file.
    Ok(YamlDocument::assembled(yaml.trim_end().to_owned()))
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// `values.schema.json`: a JSON Schema (draft 7, which helm validates with) in which every
/// object refuses keys it does not declare, so a misspelt value fails rather than being
/// ignored.
fn schema(crate_name: &str, settings: &[Setting]) -> Value {
    let mut root = object_schema();
    root["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    root["title"] = json!(format!("The values of the {crate_name} chart"));
    // Helm gives every chart `global`, shared with subcharts; this chart reads none of it.
    root["properties"]["global"] = json!({"type": "object"});
    for setting in settings {
        let mut node = &mut root;
        for key in &setting.path[..setting.path.len() - 1] {
            let properties = &mut node["properties"];
            if properties.get(*key).is_none() {
                properties[*key] = object_schema();
            }
            node = &mut properties[*key];
        }
        let leaf = setting.path[setting.path.len() - 1];
        node["properties"][leaf] = leaf_schema(setting);
    }
    root
}

fn object_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {}})
}

fn leaf_schema(setting: &Setting) -> Value {
    let mut leaf = match setting.kind {
        Kind::Boolean => json!({"type": "boolean"}),
        Kind::Integer { minimum, maximum } => {
            json!({"type": "integer", "minimum": minimum, "maximum": maximum})
        }
        Kind::String => json!({"type": "string", "minLength": 1}),
        Kind::BaseUrl => json!({"type": "string", "pattern": "^(https://[^/\\s\"'#?]+)?$"}),
        Kind::OneOf(choices) => json!({"type": "string", "enum": choices}),
        Kind::Tag => json!({"type": ["string", "integer"], "minLength": 1}),
        Kind::Resources => {
            let quantities = json!({
                "type": "object",
                "additionalProperties": {"type": ["string", "number"]},
            });
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "limits": quantities,
                    "requests": quantities,
                    "claims": {"type": "array", "items": {"type": "object"}},
                },
            })
        }
    };
    leaf["description"] = json!(setting.doc);
    leaf["default"] = setting.default.clone();
    leaf
}

fn row(setting: &Setting) -> ValueRow {
    let kind = match setting.kind {
        Kind::Boolean => "boolean".to_owned(),
        Kind::Integer { minimum, maximum } => format!("integer, {minimum} to {maximum}"),
        Kind::String => "string".to_owned(),
        Kind::BaseUrl => "https:// URL, or empty".to_owned(),
        Kind::OneOf(choices) => format!("one of {}", choices.join(", ")),
        Kind::Tag => "string or integer".to_owned(),
        Kind::Resources => "limits, requests and claims".to_owned(),
    };
    ValueRow {
        path: Text::new(setting.path.join(".")),
        kind: Text::new(kind),
        default: Text::new(setting.default.to_string()),
        doc: Constant(setting.doc),
    }
}

/// The Helm actions the templates shared with the kustomize base print when they render into
/// the chart: conditions on values. The generator's own text; what names the operator's
/// namespace there is [`InRelease`].
#[derive(Debug, Clone, Serialize)]
pub struct HelmHooks {
    pub if_cert_manager: GoTemplate,
    pub if_self_managed: GoTemplate,
    pub else_: GoTemplate,
    pub end: GoTemplate,
    /// Whether `webhooks.url` is set, and its value, for the configurations' `clientConfig`.
    pub if_webhooks_url: GoTemplate,
    pub webhooks_url: GoTemplate,
}

impl HelmHooks {
    pub fn new() -> Self {
        let certificates = |mode: &str| {
            GoTemplate::composed(format!(
                "{{{{- if eq .Values.webhooks.certificates {} }}}}",
                go_template::string(mode)
            ))
        };
        Self {
            if_cert_manager: certificates(CERT_MANAGER),
            if_self_managed: certificates(SELF_MANAGED),
            else_: GoTemplate::composed("{{- else }}".to_owned()),
            end: GoTemplate::composed("{{- end }}".to_owned()),
            if_webhooks_url: GoTemplate::composed("{{- if .Values.webhooks.url }}".to_owned()),
            webhooks_url: GoTemplate::composed("{{ .Values.webhooks.url }}".to_owned()),
        }
    }
}

impl Default for HelmHooks {
    fn default() -> Self {
        Self::new()
    }
}

/// What names the operator's namespace in the model, as a chart prints it: with the release's
/// namespace, so that `helm install --namespace` puts the operator anywhere and its RBAC,
/// Service, webhooks and certificate follow. Each replaces the model's value of the same
/// name, in its `yaml` form, which is the only one the chart's templates print.
#[derive(Debug, Clone, Serialize)]
pub struct InRelease {
    /// For `deploy.namespace`.
    pub namespace: InReleaseText,
    /// For `webhooks.dns_names`, `webhooks.inject_ca_from` and `webhooks.match_condition`.
    pub dns_names: Vec<InReleaseText>,
    pub inject_ca_from: InReleaseText,
    pub match_condition: InReleaseText,
}

/// One value of [`InRelease`], printed as the model's [`Text`] is in YAML.
#[derive(Debug, Clone, Serialize)]
pub struct InReleaseText {
    pub yaml: GoTemplate,
}

impl InRelease {
    /// The release's names of the operator called `crate_name`.
    pub fn new(crate_name: &str) -> Self {
        let text = |around: &go_template::AroundNamespace| InReleaseText {
            yaml: around.in_release(),
        };
        Self {
            namespace: text(&go_template::AroundNamespace::alone()),
            dns_names: super::webhooks::dns_names(crate_name)
                .iter()
                .map(text)
                .collect(),
            inject_ca_from: text(&super::webhooks::inject_ca_from(crate_name)),
            match_condition: text(&super::webhooks::not_own_bookkeeping(crate_name)),
        }
    }
}

/// The paths of every value a chart of `features` has, dotted: what its templates may read.
#[cfg(test)]
pub(crate) fn value_paths(features: Features) -> Vec<String> {
    settings("operator", features)
        .iter()
        .map(|setting| setting.path.join("."))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Features = Features {
        sharding: true,
        webhooks: true,
        admission: true,
        crd: true,
    };

    #[test]
    fn values_yaml_nests_each_value_under_its_comment_and_parses_to_the_defaults() {
        let chart = chart("op", "ns", true, ALL, None).unwrap();
        let yaml = chart.values_yaml.as_str();
        assert!(
            yaml.starts_with("image:\n  # The operator's image"),
            "{yaml}"
        );
        assert!(yaml.contains("  repository: op\n"), "{yaml}");
        assert_eq!(yaml.matches("\nmonitoring:\n").count(), 1, "{yaml}");
        let parsed: Value = serde_saphyr::from_str(yaml).unwrap();
        for setting in settings("op", ALL) {
            let mut value = &parsed;
            for key in setting.path {
                value = &value[*key];
            }
            assert_eq!(value, &setting.default, "{}", setting.path.join("."));
        }
        assert!(yaml.lines().all(|line| line.len() <= 96), "{yaml}");
    }

    #[test]
    fn the_schema_types_every_value_and_refuses_undeclared_keys() {
        let schema: Value = serde_json::from_str(
            chart("op", "ns", true, ALL, None)
                .unwrap()
                .values_schema
                .as_str(),
        )
        .unwrap();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["replicas"]["type"], json!("integer"));
        assert_eq!(
            schema["properties"]["webhooks"]["properties"]["certificates"]["enum"],
            json!(["self-managed", "cert-manager"])
        );
        assert_eq!(
            schema["properties"]["monitoring"]["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn values_follow_the_operators_features() {
        let plain = Features {
            sharding: false,
            webhooks: false,
            admission: false,
            crd: false,
        };
        let paths = value_paths(plain);
        let optional =
            |p: &String| p == "sharding" || p.starts_with("webhooks") || p.starts_with("crds");
        assert!(!paths.iter().any(optional), "{paths:?}");
        let table = chart("op", "ns", false, plain, None).unwrap().values_table;
        let rows: Vec<&str> = table.iter().map(|row| row.path.raw()).collect();
        assert_eq!(rows, paths, "a row per value, in values.yaml's order");
        let replicas = table.iter().find(|row| row.path.raw() == "replicas");
        let replicas = replicas.map(|row| row.default.raw());
        assert_eq!(replicas, Some("2"), "leader election, not sharding");
        let all = value_paths(ALL);
        assert!(all.contains(&"webhooks.certificates".to_owned()));
        assert!(all.contains(&"webhooks.url".to_owned()));
    }

    #[test]
    fn a_long_crate_name_is_cut_to_a_release_name_helm_takes() {
        let long = "c-applicationautoscaling-services-k8s-aws-scalingpolicies";
        let cut = release(long);
        assert_eq!(cut.len(), 53, "{cut}");
        assert!(long.starts_with(&cut));
        // Cut where a `-` would end it: one character shorter.
        let dashed = format!("{}-tail", "a".repeat(52));
        assert_eq!(release(&dashed), "a".repeat(52));
        assert_eq!(release("short-name"), "short-name");
    }

    #[test]
    fn the_install_command_creates_only_the_operators_own_namespace() {
        let plain = chart("op", "default", false, ALL, None).unwrap().install;
        assert_eq!(
            plain[0].raw(),
            "helm install op deploy/chart --namespace default -f deploy/values.yaml"
        );
        let own = chart("op", "op", true, ALL, None).unwrap().install;
        assert!(
            own[0]
                .raw()
                .ends_with("--namespace op --create-namespace -f deploy/values.yaml"),
            "{}",
            own[0].raw()
        );
    }

    #[test]
    fn each_overlay_is_handed_to_the_release_the_install_command_names() {
        let chart = chart("op", "ops", true, ALL, None).unwrap();
        let overlays: Vec<&str> = chart
            .switching
            .to_helm
            .iter()
            .map(|adoption| adoption.overlay.raw())
            .collect();
        assert_eq!(overlays, ["deploy/local/", "deploy/"]);
        for adoption in &chart.switching.to_helm {
            let [label, annotate, install] = adoption.commands.as_slice() else {
                panic!("{:?}", adoption.commands);
            };
            let overlay = adoption.overlay.raw();
            assert!(label.raw().contains(&format!("-k {overlay} ")), "{label:?}");
            assert!(label.raw().ends_with("app.kubernetes.io/managed-by=Helm"));
            assert!(
                annotate
                    .raw()
                    .starts_with(&format!("kubectl kustomize {overlay} |")),
                "{annotate:?}"
            );
            assert!(
                annotate
                    .raw()
                    .ends_with("meta.helm.sh/release-name=op meta.helm.sh/release-namespace=ops")
            );
            assert_eq!(install, &chart.install[0]);
        }
        let back: Vec<&str> = chart.switching.to_kustomize.iter().map(Text::raw).collect();
        assert_eq!(
            back,
            [
                "helm uninstall op --namespace ops",
                "kubectl apply --server-side --force-conflicts -k deploy/",
            ]
        );
    }

    #[test]
    fn the_charts_crd_is_kept_on_uninstall_and_otherwise_unchanged() {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "as.b", "annotations": {"x": "y"}},
            "spec": {"group": "b", "names": {"kind": "A", "plural": "as"}, "scope": "Namespaced", "versions": []},
        }))
        .unwrap();
        let chart = chart("op", "ns", true, ALL, Some(&crd)).unwrap();
        let kept: Value = serde_saphyr::from_str(chart.crd_yaml.unwrap().as_str()).unwrap();
        assert_eq!(
            kept["metadata"]["annotations"]["helm.sh/resource-policy"],
            json!("keep")
        );
        assert_eq!(kept["metadata"]["annotations"]["x"], json!("y"));
        assert_eq!(kept["spec"], serde_json::to_value(&crd.spec).unwrap());
    }

    #[test]
    fn in_the_chart_the_operators_namespace_is_the_releases() {
        let names = InRelease::new("op");
        assert_eq!(
            names.namespace.yaml.as_str(),
            "{{ .Release.Namespace | quote }}"
        );
        let dns: Vec<&str> = names.dns_names.iter().map(|n| n.yaml.as_str()).collect();
        assert_eq!(
            dns,
            [
                r#"{{ print "op." .Release.Namespace ".svc" | quote }}"#,
                r#"{{ print "op." .Release.Namespace ".svc.cluster.local" | quote }}"#,
            ]
        );
        assert_eq!(
            names.inject_ca_from.yaml.as_str(),
            r#"{{ print .Release.Namespace "/op-webhook" | quote }}"#
        );
        let condition = names.match_condition.yaml.as_str();
        assert!(
            condition.starts_with(
                r#"{{ print "!(request.userInfo.username == 'system:serviceaccount:" .Release.Namespace ":op' && "#
            ),
            "{condition}"
        );
        assert_eq!(
            HelmHooks::new().if_cert_manager.as_str(),
            r#"{{- if eq .Values.webhooks.certificates "cert-manager" }}"#
        );
    }
}
