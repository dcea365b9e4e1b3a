//! Admission hooks for `Deployment`, which the generated webhook server (`src/webhook.rs`)
//! calls before the API server stores one. This file is the user's: `cargo xtask gen --out
//! generated/deployment-guard` never touches it.
//!
//! `validate` refuses a Deployment whose containers run an image that is not pinned, by a tag
//! other than `latest` or by a digest, so that what runs is what was reviewed. `mutate` gives
//! every Deployment an owner annotation, `unowned` until someone says otherwise, so that every
//! stored Deployment says who answers for it.

use std::collections::BTreeMap;

use crate::controller::Primary;

/// The annotation `mutate` defaults.
pub const OWNER_ANNOTATION: &str = "deployment-guard.example.com/owner";

/// What `mutate` writes there when a Deployment names no owner.
pub const UNOWNED: &str = "unowned";

/// Whether `deployment` may be stored; `old` is unused, as any pinned Deployment may replace
/// another.
pub async fn validate(deployment: &Primary, old: Option<&Primary>) -> Result<(), String> {
    let _ = old;
    let containers = deployment
        .spec
        .template
        .spec
        .iter()
        .flat_map(|pod| pod.init_containers.iter().flatten().chain(&pod.containers));
    for container in containers {
        let image = container.image.as_deref().unwrap_or_default();
        if !is_pinned(image) {
            return Err(format!(
                "container {:?} runs {image:?}, which is not pinned: name a tag other than \
                 `latest`, or a digest (`@sha256:…`)",
                container.name
            ));
        }
    }
    Ok(())
}

/// An image reference with a digest, or with a tag that is not `latest`. A registry's port
/// (`registry:5000/app`) is not a tag.
fn is_pinned(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    let name = image.rsplit('/').next().unwrap_or(image);
    match name.rsplit_once(':') {
        Some((_, tag)) => !tag.is_empty() && tag != "latest",
        None => false,
    }
}

/// Gives a Deployment without an owner annotation the `unowned` one.
pub async fn mutate(deployment: &mut Primary) -> Result<(), String> {
    deployment
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .entry(OWNER_ANNOTATION.to_owned())
        .or_insert_with(|| UNOWNED.to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{
        apps::v1::DeploymentSpec,
        core::v1::{Container, PodSpec, PodTemplateSpec},
    };

    use super::*;

    fn running(images: &[&str]) -> Primary {
        let containers = images
            .iter()
            .enumerate()
            .map(|(index, image)| Container {
                name: format!("c{index}"),
                image: Some((*image).to_owned()),
                ..Container::default()
            })
            .collect();
        Primary {
            spec: DeploymentSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers,
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                },
                ..DeploymentSpec::default()
            },
            ..Primary::default()
        }
    }

    #[tokio::test]
    async fn only_images_pinned_by_tag_or_digest_are_stored() {
        for pinned in [
            "nginx:1.27",
            "registry:5000/team/app:v2",
            "app@sha256:0123456789abcdef",
        ] {
            assert!(
                validate(&running(&[pinned]), None).await.is_ok(),
                "{pinned}"
            );
        }
        for floating in ["nginx", "nginx:latest", "registry:5000/team/app", "app:"] {
            let refusal = validate(&running(&["nginx:1.27", floating]), None)
                .await
                .expect_err(floating);
            assert!(refusal.contains("c1"), "names the container: {refusal}");
            assert!(refusal.contains("not pinned"), "{refusal}");
        }
    }

    #[tokio::test]
    async fn an_owner_is_defaulted_and_never_replaced() {
        let mut deployment = running(&["nginx:1.27"]);
        mutate(&mut deployment).await.expect("mutate allows it");
        let annotations = deployment.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[OWNER_ANNOTATION], UNOWNED);
        deployment
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(OWNER_ANNOTATION.to_owned(), "payments".to_owned());
        mutate(&mut deployment).await.expect("mutate allows it");
        let annotations = deployment.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations[OWNER_ANNOTATION], "payments");
    }
}
