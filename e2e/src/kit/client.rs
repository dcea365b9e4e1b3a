//! A kube client of the cluster in a kubeconfig, for checks that make many requests at once,
//! where a kubectl per request would take the check's time.

use std::path::Path;

use anyhow::Result;
use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};

/// A client with the credentials and server of the kubeconfig at `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> Result<Client> {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    Ok(Client::try_from(config)?)
}
