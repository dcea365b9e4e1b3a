//! `kubeconfig [<crate>]`: a kubeconfig whose user is the operator's ServiceAccount, for the
//! local loop (`cargo run` against a cluster), so that what the operator may do there is what
//! `deploy/` grants its pods rather than what the admin may. The e2e's local runs use it too
//! ([`write_for`]).
//!
//! The token comes from a TokenRequest, as `kubectl create token` asks for one, and the
//! cluster from the current context of the kubeconfig kubectl reads (`KUBECONFIG`), so a
//! cluster reached through an exec plugin or a proxy is reached the same way. The admin's own
//! credentials are left out of what is written, and the file is its owner's alone (0600) from
//! the moment it exists.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
};

use anyhow::{Context as _, bail};
use operator_gen::crate_dir::CrateDir;
use serde_json::{Value, json};

use crate::{shown, shown_path};

/// The largest `deploy/base/deployment.yaml` read.
const MAX_DEPLOYMENT_BYTES: u64 = 1024 * 1024;

/// Where the kubeconfig goes in the crate by default: under `target/`, which git ignores.
const DEFAULT_OUT: &str = "target/service-account.kubeconfig";

#[derive(clap::Args, Debug, Clone)]
pub struct KubeconfigArgs {
    /// The operator crate; the current folder by default. Its `deploy/base/deployment.yaml`
    /// names the ServiceAccount and its namespace.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The file to write; `<crate>/target/service-account.kubeconfig` by default.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The ServiceAccount's namespace, when an overlay moved the operator from the one
    /// `deploy/` names.
    #[arg(long)]
    pub namespace: Option<String>,
    /// How long the token lasts, as `kubectl create token --duration` takes it (`30m`,
    /// `2h`); the API server may cap it.
    #[arg(long, default_value = "1h")]
    pub duration: String,
    /// The kubectl to run, which reads the cluster and the admin's credentials from its own
    /// kubeconfig (`KUBECONFIG`, or `~/.kube/config`).
    #[arg(long, default_value = "kubectl")]
    pub kubectl: PathBuf,
}

/// A ServiceAccount, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    /// The one the crate in `dir` runs as: its `deploy/base/deployment.yaml`'s namespace and
    /// `serviceAccountName`, read capped, links refused.
    pub fn of_crate(dir: &Path) -> anyhow::Result<Self> {
        let relative = Path::new("deploy/base/deployment.yaml");
        let path = dir.join(relative);
        let bytes = CrateDir::new(dir)
            .read(relative, MAX_DEPLOYMENT_BYTES)?
            .with_context(|| {
                format!(
                    "{} is missing: pass the folder of a crate operator-gen generated",
                    shown_path(&path)
                )
            })?;
        let text = String::from_utf8(bytes)
            .with_context(|| format!("{} is not UTF-8", shown_path(&path)))?;
        let deployment: Value =
            serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
                .with_context(|| format!("reading {}", shown_path(&path)))?;
        let field = |pointer: &str| {
            deployment
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .with_context(|| {
                    format!(
                        "{} has no {}: regenerate it with `operator-gen gen`",
                        shown_path(&path),
                        pointer.trim_start_matches('/').replace('/', ".")
                    )
                })
        };
        Ok(Self {
            namespace: field("/metadata/namespace")?,
            name: field("/spec/template/spec/serviceAccountName")?,
        })
    }
}

pub fn run(args: KubeconfigArgs) -> anyhow::Result<ExitCode> {
    let mut account = ServiceAccount::of_crate(&args.dir)?;
    if let Some(namespace) = args.namespace {
        if !is_dns_label(&namespace) {
            bail!(
                "--namespace {} is not a namespace name: lowercase letters, digits and `-`, \
                 at most 63",
                shown(&namespace)
            );
        }
        account.namespace = namespace;
    }
    check_duration(&args.duration)?;
    let kubectl = |arguments: &[&str]| {
        let mut command = Command::new(&args.kubectl);
        command.args(arguments);
        command
    };
    let config = service_account_config(&kubectl, &account, &args.duration)?;
    let shown_path = match &args.out {
        Some(out) => {
            write_private(out, &config)?;
            out.display().to_string()
        }
        None => {
            write_in_crate(&CrateDir::new(&args.dir), Path::new(DEFAULT_OUT), &config)?;
            args.dir.join(DEFAULT_OUT).display().to_string()
        }
    };
    println!(
        "wrote {}: ServiceAccount {}/{}, with a token for {}",
        shown(&shown_path),
        account.namespace,
        account.name,
        shown(&args.duration)
    );
    println!(
        "run the operator as it, with deploy/local/ applied: KUBECONFIG={} cargo run",
        shown(&shown_path)
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes to `path` a kubeconfig for `account`, with a token lasting `duration`, from what
/// `kubectl` (each command made by it, with its kubeconfig set) reads: the code behind
/// `operator-gen kubeconfig`, for programs that run the operator as it.
pub fn write_for(
    kubectl: &dyn Fn(&[&str]) -> Command,
    account: &ServiceAccount,
    duration: &str,
    path: &Path,
) -> anyhow::Result<()> {
    check_duration(duration)?;
    write_private(path, &service_account_config(kubectl, account, duration)?)
}

/// The kubeconfig of `account`: the current context's cluster, and a token the API server
/// issued for `account`, in place of every user the kubeconfig had.
fn service_account_config(
    kubectl: &dyn Fn(&[&str]) -> Command,
    account: &ServiceAccount,
    duration: &str,
) -> anyhow::Result<Value> {
    let ServiceAccount { namespace, name } = account;
    let token = run_kubectl(
        kubectl(&[
            "create",
            "token",
            name,
            "-n",
            namespace,
            "--duration",
            duration,
        ]),
        &format!("asking for a token of the ServiceAccount {namespace}/{name}"),
    )
    .map_err(|error| match format!("{error:#}").contains("not found") {
        true => error.context(format!(
            "the ServiceAccount {namespace}/{name} is not in the cluster: apply deploy/local/ \
             first (`kubectl apply --server-side -k deploy/local/`)"
        )),
        false => error,
    })?;
    let token = String::from_utf8(token).context("kubectl printed a token that is not UTF-8")?;
    let current = run_kubectl(
        kubectl(&["config", "view", "--minify", "--raw", "-o", "json"]),
        "reading kubectl's current context",
    )?;
    let current: Value =
        serde_json::from_slice(&current).context("reading `kubectl config view`'s output")?;
    let cluster = current["clusters"][0].clone();
    let Some(cluster_name) = cluster["name"].as_str() else {
        bail!("kubectl's current context names no cluster: `kubectl config current-context`");
    };
    let user = format!("{name}@{namespace}");
    let context = format!("{user}/{cluster_name}");
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token.trim()}}],
        "contexts": [{"name": context, "context": {
            "cluster": cluster_name,
            "user": user,
            "namespace": namespace,
        }}],
        "current-context": context,
    }))
}

/// What `command` printed, or an error with what kubectl said.
fn run_kubectl(mut command: Command, doing: &str) -> anyhow::Result<Vec<u8>> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{doing}: running kubectl"))?;
    if !output.status.success() {
        bail!(
            "{doing}: kubectl said {}",
            shown(&String::from_utf8_lossy(&output.stderr).trim())
        );
    }
    Ok(output.stdout)
}

/// `config` written to the path `path`, typed by a person: a new file of mode 0600 beside it,
/// renamed over it.
fn write_private(path: &Path, config: &Value) -> anyhow::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // tempfile creates its files 0600.
    let mut file = tempfile::Builder::new()
        .prefix(".kubeconfig-")
        .tempfile_in(parent)
        .with_context(|| format!("creating a file in {}", shown_path(parent)))?;
    file.write_all(config.to_string().as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("writing {}", shown_path(path)))?;
    file.persist(path)
        .with_context(|| format!("writing {}", shown_path(path)))?;
    Ok(())
}

/// `config` written to `relative` in the crate folder, reached without following a link:
/// a new private file beside it, renamed over it.
fn write_in_crate(dir: &CrateDir, relative: &Path, config: &Value) -> anyhow::Result<()> {
    if let Some(parent) = relative.parent()
        && !dir.exists(parent)?
    {
        dir.create_dir(parent)?;
    }
    let staged = relative.with_file_name(format!(".kubeconfig-{}", std::process::id()));
    if dir.exists(&staged)? {
        dir.remove_file(&staged)?;
    }
    dir.write_new_private(&staged, config.to_string().as_bytes())?;
    dir.rename(&staged, relative).inspect_err(|_| {
        let _ = dir.remove_file(&staged);
    })?;
    Ok(())
}

/// Whether `duration` is what `kubectl create token --duration` takes and a person means:
/// whole numbers of hours, minutes and seconds (`1h30m`).
fn check_duration(duration: &str) -> anyhow::Result<()> {
    // Each part is digits then a unit, and the text ends with a unit.
    let mut digits = 0;
    let well_formed = !duration.is_empty()
        && duration.chars().all(|c| match c {
            '0'..='9' => {
                digits += 1;
                true
            }
            'h' | 'm' | 's' => std::mem::take(&mut digits) > 0,
            _ => false,
        })
        && digits == 0;
    if !well_formed {
        bail!(
            "--duration {} is not a duration: give hours, minutes or seconds, such as 30m or 2h",
            shown(&duration)
        );
    }
    Ok(())
}

/// Whether `name` is a DNS label, as a namespace's name is.
fn is_dns_label(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_whole_hours_minutes_and_seconds() {
        for good in ["1h", "30m", "1h30m", "90s", "2h0m5s"] {
            assert!(check_duration(good).is_ok(), "{good}");
        }
        for bad in ["", "h", "1", "1d", "1.5h", "-1h", "1h 30m", "1h;rm"] {
            let error = check_duration(bad).unwrap_err().to_string();
            assert!(error.contains("--duration"), "{bad}: {error}");
        }
    }

    /// A crate folder whose Deployment runs as `sa` in `ns`.
    fn crate_with_deployment(deployment: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("deploy/base")).unwrap();
        std::fs::write(dir.path().join("deploy/base/deployment.yaml"), deployment).unwrap();
        dir
    }

    #[test]
    fn the_service_account_is_the_one_the_deployment_runs_as() {
        let dir = crate_with_deployment(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: op, namespace: ns}\n\
             spec: {template: {spec: {serviceAccountName: sa}}}\n",
        );
        let account = ServiceAccount::of_crate(dir.path()).unwrap();
        assert_eq!(
            account,
            ServiceAccount {
                namespace: "ns".to_owned(),
                name: "sa".to_owned()
            }
        );
        let unnamed = crate_with_deployment("metadata: {name: op, namespace: ns}\n");
        let error = ServiceAccount::of_crate(unnamed.path()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("deployment.yaml has no spec.template.spec.serviceAccountName"),
            "{error}"
        );
        let missing = tempfile::tempdir().unwrap();
        let error = ServiceAccount::of_crate(missing.path()).unwrap_err();
        assert!(error.to_string().contains("is missing"), "{error}");
    }

    /// A kubectl that answers `create token` and `config view` as a real one would, from a
    /// script: its arguments logged to `args.log`.
    fn fake_kubectl(dir: &Path, token_exit: u8) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let script = dir.join("kubectl");
        let config = json!({
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "admin", "user": {"client-key-data": "QURNSU4tS0VZ"}}],
            "contexts": [{"name": "admin@c", "context": {"cluster": "c", "user": "admin"}}],
            "current-context": "admin@c",
        });
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$1\" in\n\
                 create) [ {token_exit} = 0 ] || {{ echo 'error: failed to create token: serviceaccounts \"sa\" not found' >&2; exit {token_exit}; }}; echo tok3n ;;\n\
                 config) echo '{config}' ;;\nesac\n",
                log = dir.join("args.log").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    /// `write_for` the ServiceAccount `ns/sa` into `<tmp>/sa.kubeconfig`, through
    /// [`fake_kubectl`]; the path.
    fn write_with_fake(
        tmp: &Path,
        token_exit: u8,
        duration: &str,
    ) -> (PathBuf, anyhow::Result<()>) {
        let kubectl = fake_kubectl(tmp, token_exit);
        let account = ServiceAccount {
            namespace: "ns".to_owned(),
            name: "sa".to_owned(),
        };
        let out = tmp.join("sa.kubeconfig");
        let command = |arguments: &[&str]| {
            let mut command = Command::new(&kubectl);
            command.args(arguments);
            command
        };
        let written = write_for(&command, &account, duration, &out);
        (out, written)
    }

    #[test]
    fn the_kubeconfig_holds_the_accounts_token_and_not_the_admins_credentials() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let (out, written) = write_with_fake(tmp.path(), 0, "2h");
        written.unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(
            written["users"],
            json!([{"name": "sa@ns", "user": {"token": "tok3n"}}])
        );
        assert_eq!(written["contexts"][0]["context"]["namespace"], "ns");
        assert_eq!(written["current-context"], "sa@ns/c");
        assert_eq!(
            written["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert!(!written.to_string().contains("QURNSU4tS0VZ"));
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let log = std::fs::read_to_string(tmp.path().join("args.log")).unwrap();
        assert!(log.contains("create token sa -n ns --duration 2h"), "{log}");
    }

    #[test]
    fn a_missing_service_account_says_to_apply_deploy_local_and_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, written) = write_with_fake(tmp.path(), 1, "1h");
        let error = written.unwrap_err();
        assert!(
            format!("{error:#}").contains("apply deploy/local/ first"),
            "{error:#}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn in_a_crate_it_is_written_under_target_through_no_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("crate");
        std::fs::create_dir_all(&root).unwrap();
        let dir = CrateDir::new(&root);
        write_in_crate(&dir, Path::new(DEFAULT_OUT), &json!({"a": 1})).unwrap();
        write_in_crate(&dir, Path::new(DEFAULT_OUT), &json!({"a": 2})).unwrap();
        let written = std::fs::read_to_string(root.join(DEFAULT_OUT)).unwrap();
        assert_eq!(written, r#"{"a":2}"#);
        let names: Vec<_> = std::fs::read_dir(root.join("target")).unwrap().collect();
        assert_eq!(names.len(), 1, "no staged file is left");
        let linked = tmp.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(tmp.path(), linked.join("target")).unwrap();
        let error = write_in_crate(&CrateDir::new(&linked), Path::new(DEFAULT_OUT), &json!({}));
        assert!(error.is_err());
        assert!(!tmp.path().join("service-account.kubeconfig").exists());
    }
}
