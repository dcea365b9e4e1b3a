//! The image as one tarball that is both an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) and a `docker save` archive (`manifest.json` naming the same blobs), as
//! Docker 25 and later write it: `ctr images import`, `kind load image-archive`, `podman load`,
//! `docker load` and `skopeo` (`oci-archive:` or `docker-archive:`) all read it.
//!
//! Every JSON document is written with sorted keys, so its digest, and the whole archive,
//! depend only on what the image holds.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, HistoryBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Os, PlatformBuilder, RootFsBuilder,
};
use serde_json::{Value, json};

use crate::{Error, Reference, Result, layer::Layer};

/// What the image's configuration says beyond its layer.
#[derive(Debug)]
pub struct Config<'a> {
    pub architecture: Arch,
    pub entrypoint: &'a str,
    pub user: &'a str,
    pub ports: &'a [u16],
    /// The folders libraries were copied into, for `LD_LIBRARY_PATH`.
    pub library_path: Vec<String>,
    /// The image's title label: the operator's name.
    pub title: &'a str,
}

/// The image's documents and its layer, ready to be written as one tarball.
#[derive(Debug)]
pub struct Archive {
    layer: Layer,
    config: Vec<u8>,
    config_digest: String,
    manifest: Vec<u8>,
    manifest_digest: String,
    index: Vec<u8>,
    docker_manifest: Vec<u8>,
    normalized: String,
}

/// The `created` time of every image: the epoch, so that a rebuild gives the same bytes.
const CREATED: &str = "1970-01-01T00:00:00Z";

impl Archive {
    /// The documents of an image named `reference`, configured by `config`, of `layer`.
    ///
    /// # Errors
    ///
    /// [`Error::Document`] when oci-spec refuses a document.
    pub fn new(reference: &Reference, config: &Config<'_>, layer: Layer) -> Result<Self> {
        let configuration = configuration(config, &layer)?;
        let config_digest = crate::layer::digest(&configuration);
        let layer_descriptor = Descriptor::new(
            MediaType::ImageLayer,
            layer.bytes().len() as u64,
            digest_of(layer.digest())?,
        );
        let config_descriptor = Descriptor::new(
            MediaType::ImageConfig,
            configuration.len() as u64,
            digest_of(&config_digest)?,
        );
        let manifest = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config_descriptor)
            .layers(vec![layer_descriptor])
            .build()
            .map_err(|error| document("manifest", error))?;
        let manifest = canonical(&manifest, "manifest")?;
        let manifest_digest = crate::layer::digest(&manifest);
        let normalized = reference.normalized();
        let mut manifest_descriptor = Descriptor::new(
            MediaType::ImageManifest,
            manifest.len() as u64,
            digest_of(&manifest_digest)?,
        );
        manifest_descriptor.set_platform(Some(
            PlatformBuilder::default()
                .architecture(config.architecture.clone())
                .os(Os::Linux)
                .build()
                .map_err(|error| document("platform", error))?,
        ));
        manifest_descriptor.set_annotations(Some(
            [
                // How containerd names what it imports from an OCI layout.
                ("io.containerd.image.name".to_owned(), normalized.clone()),
                // The OCI layout's own name for it: the tag.
                (
                    "org.opencontainers.image.ref.name".to_owned(),
                    reference.tag().to_owned(),
                ),
            ]
            .into_iter()
            .collect(),
        ));
        let index = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![manifest_descriptor])
            .build()
            .map_err(|error| document("index", error))?;
        let index = canonical(&index, "index")?;
        let docker_manifest = canonical(
            &json!([{
                "Config": blob_path(&config_digest),
                "RepoTags": [reference.to_string()],
                "Layers": [blob_path(layer.digest())],
            }]),
            "docker manifest",
        )?;
        Ok(Self {
            layer,
            config: configuration,
            config_digest,
            manifest,
            manifest_digest,
            index,
            docker_manifest,
            normalized,
        })
    }

    pub fn config_digest(&self) -> &str {
        &self.config_digest
    }

    pub fn manifest_digest(&self) -> &str {
        &self.manifest_digest
    }

    pub fn normalized_reference(&self) -> &str {
        &self.normalized
    }

    /// The archive's files, in the order they are written: the documents a reader needs
    /// first, then the blobs.
    fn files(&self) -> Vec<(String, &[u8])> {
        vec![
            (
                "oci-layout".to_owned(),
                br#"{"imageLayoutVersion":"1.0.0"}"#.as_slice(),
            ),
            ("index.json".to_owned(), &self.index),
            ("manifest.json".to_owned(), &self.docker_manifest),
            (blob_path(&self.manifest_digest), &self.manifest),
            (blob_path(&self.config_digest), &self.config),
            (blob_path(self.layer.digest()), self.layer.bytes()),
        ]
    }

    /// Writes the archive to `writer`.
    fn write_to(&self, writer: impl std::io::Write) -> std::io::Result<()> {
        let mut builder = tar::Builder::new(writer);
        for dir in ["blobs/", "blobs/sha256/"] {
            let mut header = header(tar::EntryType::Directory, 0o755, 0);
            builder.append_data(&mut header, dir, std::io::empty())?;
        }
        for (path, bytes) in self.files() {
            let mut header = header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
            builder.append_data(&mut header, path, bytes)?;
        }
        std::io::Write::flush(&mut builder.into_inner()?)
    }

    /// Writes the archive to `out` through a temporary file beside it, renamed into place
    /// once whole.
    pub fn write(&self, out: &Path) -> Result<()> {
        let failed = |reason: String| Error::Write {
            path: out.to_owned(),
            reason,
        };
        let dir = match out.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut file = tempfile::NamedTempFile::new_in(&dir).map_err(|error| {
            failed(format!(
                "creating a temporary file in {}: {error}",
                dir.display()
            ))
        })?;
        self.write_to(std::io::BufWriter::new(file.as_file_mut()))
            .and_then(|()| file.as_file().sync_all())
            .map_err(|error| failed(error.to_string()))?;
        file.persist(out)
            .map_err(|error| failed(error.error.to_string()))?;
        Ok(())
    }
}

/// A tar header owned by root at time zero.
fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// The image's configuration document.
fn configuration(config: &Config<'_>, layer: &Layer) -> Result<Vec<u8>> {
    let mut env = Vec::new();
    if !config.library_path.is_empty() {
        env.push(format!("LD_LIBRARY_PATH={}", config.library_path.join(":")));
    }
    let mut runtime = ConfigBuilder::default()
        .user(config.user.to_owned())
        .entrypoint(vec![config.entrypoint.to_owned()])
        .working_dir("/".to_owned())
        .exposed_ports(
            config
                .ports
                .iter()
                .map(|port| format!("{port}/tcp"))
                .collect::<Vec<_>>(),
        )
        .labels(
            [
                (
                    "org.opencontainers.image.title".to_owned(),
                    config.title.to_owned(),
                ),
                (
                    "org.opencontainers.image.description".to_owned(),
                    "built by operator-gen image".to_owned(),
                ),
            ]
            .into_iter()
            .collect::<HashMap<_, _>>(),
        );
    if !env.is_empty() {
        runtime = runtime.env(env);
    }
    let image = ImageConfigurationBuilder::default()
        .created(CREATED.to_owned())
        .architecture(config.architecture.clone())
        .os(Os::Linux)
        .config(
            runtime
                .build()
                .map_err(|error| document("configuration", error))?,
        )
        .rootfs(
            RootFsBuilder::default()
                .typ("layers".to_owned())
                .diff_ids(vec![layer.digest().to_owned()])
                .build()
                .map_err(|error| document("configuration", error))?,
        )
        .history(vec![
            HistoryBuilder::default()
                .created(CREATED.to_owned())
                .created_by(format!("operator-gen image: {}", config.entrypoint))
                .build()
                .map_err(|error| document("configuration", error))?,
        ])
        .build()
        .map_err(|error| document("configuration", error))?;
    canonical(&image, "configuration")
}

/// `value` as JSON with every object's keys sorted, whatever map type it was built with.
fn canonical(value: &impl serde::Serialize, name: &'static str) -> Result<Vec<u8>> {
    let value = serde_json::to_value(value).map_err(|error| document(name, error))?;
    let mut bytes = Vec::new();
    write_sorted(&value, &mut bytes);
    Ok(bytes)
}

fn write_sorted(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                out.extend(Value::String(key.clone()).to_string().into_bytes());
                out.push(b':');
                write_sorted(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_sorted(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(scalar.to_string().into_bytes()),
    }
}

/// `blobs/sha256/<hex>` for `sha256:<hex>`.
fn blob_path(digest: &str) -> String {
    format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"))
}

fn digest_of(digest: &str) -> Result<oci_spec::image::Digest> {
    digest
        .parse()
        .map_err(|error: oci_spec::OciSpecError| document("digest", error))
}

fn document(document: &'static str, error: impl std::fmt::Display) -> Error {
    Error::Document {
        document,
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_are_sorted_at_every_depth() {
        let value = json!({"b": {"z": 1, "a": [ {"y": true, "x": null} ]}, "a": "s\"q"});
        let bytes = canonical(&value, "test").expect("serialized");
        assert_eq!(
            String::from_utf8(bytes).expect("UTF-8"),
            r#"{"a":"s\"q","b":{"a":[{"x":null,"y":true}],"z":1}}"#
        );
    }
}
