//! A rolling update of an operator with admission webhooks, as its user rolls out a new
//! image: `deploy/` applied with a new tag. Admission requests keep coming the whole time,
//! and every one must be answered: a pod that is stopping keeps serving while the Service's
//! endpoints move off it (the Deployment's preStop sleep), and the API server's own count of
//! failed webhook calls must not move.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use anyhow::{Context as _, Result, bail};
use kube::api::{DynamicObject, PostParams};

use super::{READY, Suite};

/// The tag the rollout moves to.
const ROLLOUT_TAG: &str = "e2e-rollout";

/// What the admission requests sent during the rollout got.
#[derive(Debug, Default)]
struct Answers {
    answered: usize,
    failed: usize,
    /// The first few failures, as the API server gave them.
    errors: Vec<String>,
}

impl Suite {
    /// Rolls the Deployment out to a new image while a client sends dry-run creates of a
    /// valid primary, which every webhook of the crate admits: none may fail, and the API
    /// server may count no failed call to a webhook.
    pub(super) fn rolling_update(&mut self) -> Result<()> {
        // Each old pod stops under running reconciles while its objects move to the new ones,
        // so one may lose a write to another's (a 409, retried), as when a pod is killed.
        self.fails_reconciles = Some("the rollout stops pods under running reconciles");
        let reference = format!("{}:{ROLLOUT_TAG}", self.name);
        self.load_image(&reference)?;
        let before = self.failed_webhook_calls()?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = self.admission_requests(Arc::clone(&stop))?;
        let started = Instant::now();
        self.write_overlays(Some(ROLLOUT_TAG))?;
        let rolled = self
            .apply_pods()
            .and_then(|()| self.workload.wait_ready(READY));
        stop.store(true, Ordering::SeqCst);
        let answers = requests
            .join()
            .map_err(|_| anyhow::anyhow!("the admission client panicked"))??;
        let ready = rolled?;
        let took = started.elapsed();
        let after = self.failed_webhook_calls()?;
        let counted = after - before;
        println!(
            "\n    rolled out to {reference} in {took:.1?} ({ready} pods): {} admission requests answered, {} failed; the API server counted {counted} failed webhook calls",
            answers.answered, answers.failed
        );
        let image = self.admin_output(&[
            "get",
            "deployment",
            &self.name,
            "-n",
            &self.operator_namespace,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])?;
        if image.trim() != reference {
            bail!("after the rollout the Deployment runs {image:?}, not {reference}");
        }
        if answers.failed > 0 || counted > 0.0 {
            bail!(
                "{} of {} admission requests failed during the rollout, and the API server \
                 counted {counted} failed webhook calls; the first: {}",
                answers.failed,
                answers.answered + answers.failed,
                answers.errors.join(" | ")
            );
        }
        if answers.answered == 0 {
            bail!("no admission request was answered during the rollout");
        }
        Ok(())
    }

    /// A thread that sends dry-run creates of a valid primary one after another until `stop`,
    /// and says what they got.
    fn admission_requests(
        &self,
        stop: Arc<AtomicBool>,
    ) -> Result<std::thread::JoinHandle<Result<Answers>>> {
        let mut object: DynamicObject =
            serde_json::from_value(self.primary_object("rollout")).context("the sample")?;
        let kubeconfig = self.env.kubectl.kubeconfig().to_owned();
        let namespace = self.namespace.clone();
        let (group, version) = self
            .api_version
            .split_once('/')
            .unwrap_or(("", self.api_version.as_str()));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &self.kind);
        let plural = self.primary.split('.').next().unwrap_or_default();
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        Ok(std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let client = crate::kit::client(&kubeconfig).await?;
                let api: kube::Api<DynamicObject> =
                    kube::Api::namespaced_with(client, &namespace, &resource);
                let params = PostParams {
                    dry_run: true,
                    ..PostParams::default()
                };
                let mut answers = Answers::default();
                let mut index = 0;
                while !stop.load(Ordering::SeqCst) {
                    index += 1;
                    object.metadata.name = Some(format!("rollout-{index}"));
                    match api.create(&params, &object).await {
                        Ok(_) => answers.answered += 1,
                        Err(error) => {
                            answers.failed += 1;
                            if answers.errors.len() < 3 {
                                answers.errors.push(error.to_string());
                            }
                        }
                    }
                }
                Ok(answers)
            })
        }))
    }

    /// The API server's count of webhook calls it could not make or that failed
    /// (`apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error"}`),
    /// and of those it let through failing open, over every webhook.
    fn failed_webhook_calls(&self) -> Result<f64> {
        let metrics = self
            .env
            .kubectl
            .stdout(&["get", "--raw", "/metrics"])
            .context("reading the API server's metrics")?;
        let text = String::from_utf8_lossy(&metrics);
        Ok(text
            .lines()
            .filter(|line| {
                (line.starts_with("apiserver_admission_webhook_rejection_count{")
                    && line.contains("error_type=\"calling_webhook_error\""))
                    || line.starts_with("apiserver_admission_webhook_fail_open_count{")
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }
}
