//! Container images of an operator's binary, built without a container engine: no Docker, no
//! registry, no root. The image holds the binary at `/operator`, what it needs to start and
//! nothing else, and runs as the non-root user the generated Deployment asks for.
//!
//! Where things are: [`program`] reads the binary's ELF headers and refuses what cannot run as
//! an operator's entry point; [`libraries`] finds, on the machine that built it, every shared
//! library a dynamically linked binary loads (a static one needs none); [`layer`] writes the
//! image's one layer as a tarball whose bytes depend only on the files in it; [`archive`]
//! writes the image as one tarball that is both an OCI image layout and a `docker save`
//! archive, so `ctr images import`, `kind load image-archive`, `podman load`, `docker load`
//! and `skopeo` all read it; [`reference`] checks the name and tag.
//!
//! The same binary gives the same bytes: entries are sorted, owned by root with fixed modes and
//! a zero mtime, and every JSON document is written with sorted keys.

pub mod archive;
mod error;
pub mod layer;
pub mod libraries;
pub mod program;
pub mod reference;

use std::path::{Path, PathBuf};

pub use error::{Error, Result};
pub use oci_spec::image::Arch;
pub use reference::Reference;

use crate::{
    archive::Archive,
    layer::{Entry, Layer},
    libraries::Host,
    program::{Linking, Program},
};

/// Where the binary is in the image, and so the image's entry point.
pub const ENTRYPOINT: &str = "/operator";

/// The user and group the image runs as: the non-root `nonroot` of distroless images, which
/// the generated Deployment's `securityContext` names too.
pub const USER: &str = "65532:65532";

/// Where a CA bundle goes in the image: the path rustls-native-certs and OpenSSL read on
/// Debian-like systems.
pub const CA_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What to build an image from.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// The image's name and tag.
    pub reference: Reference,
    /// The operator's executable, as built for Linux.
    pub binary: PathBuf,
    /// The architecture the image is for; the binary must be built for it.
    pub architecture: Arch,
    /// A CA bundle to put at [`CA_BUNDLE_PATH`], for HTTPS to anything but the API server
    /// (whose CA comes with the ServiceAccount's token).
    pub ca_bundle: Option<PathBuf>,
    /// Where the binary's shared libraries are looked for: `/` for this machine.
    pub host: Host,
    /// The container ports the image says it listens on.
    pub ports: Vec<u16>,
    /// Where the binary goes in the image, and so its entry point: [`ENTRYPOINT`].
    pub entrypoint: String,
    /// The `uid:gid` it runs as: [`USER`].
    pub user: String,
}

impl Recipe {
    /// A recipe for `binary` as `reference`, for this machine's architecture, with this
    /// machine's libraries and no CA bundle.
    pub fn new(reference: Reference, binary: impl Into<PathBuf>) -> Result<Self> {
        Ok(Self {
            reference,
            binary: binary.into(),
            architecture: host_architecture()?,
            ca_bundle: None,
            host: Host::machine(),
            ports: vec![8080],
            entrypoint: ENTRYPOINT.to_owned(),
            user: USER.to_owned(),
        })
    }
}

/// A built image: its one layer and the documents that describe it, ready to be written.
#[derive(Debug)]
pub struct Image {
    /// What is in it, in the layer's order, with where each file came from.
    pub contents: Vec<Content>,
    archive: Archive,
}

/// One file of the image, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// Its path in the image.
    pub path: String,
    /// The file it was copied from.
    pub source: PathBuf,
    /// What it is there for.
    pub role: Role,
}

/// Why a file is in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The operator's binary, the entry point.
    Binary,
    /// The dynamic loader a dynamically linked binary names.
    Interpreter,
    /// A shared library the binary (or another library) needs.
    Library,
    /// The CA bundle.
    CaBundle,
}

impl Image {
    /// The image's ID: the digest of its configuration, as `ctr images ls` and `docker
    /// images` show it.
    pub fn id(&self) -> &str {
        self.archive.config_digest()
    }

    /// The digest of its manifest, which a registry would serve it under.
    pub fn manifest_digest(&self) -> &str {
        self.archive.manifest_digest()
    }

    /// The reference `ctr` and the kubelet know it by (`docker.io/library/name:tag`).
    pub fn normalized_reference(&self) -> &str {
        self.archive.normalized_reference()
    }

    /// Writes it as one tarball to `out`, atomically: a temporary file beside it, renamed
    /// over it once whole, so a failed write leaves `out` as it was.
    pub fn write(&self, out: &Path) -> Result<()> {
        self.archive.write(out)
    }
}

/// Builds the image `recipe` describes: reads the binary, refuses one that cannot be the
/// image's entry point, gathers what it loads, and lays the files out.
///
/// # Errors
///
/// A binary that is missing, not executable, not an ELF program, built for another
/// architecture, or that needs a library the host does not have; a CA bundle that cannot be
/// read; a file over [`program::MAX_BINARY_BYTES`].
pub fn build(recipe: &Recipe) -> Result<Image> {
    let program = Program::read(&recipe.binary)?;
    program.expect_architecture(recipe.architecture.clone())?;
    let mut contents = vec![Content {
        path: recipe.entrypoint.clone(),
        source: recipe.binary.clone(),
        role: Role::Binary,
    }];
    let mut entries = vec![Entry::executable(
        &recipe.entrypoint,
        program.bytes().to_vec(),
    )];
    let mut library_dirs = Vec::new();
    if let Linking::Dynamic { interpreter, .. } = program.linking() {
        let loaded = libraries::resolve(&program, &recipe.host)?;
        let interpreter_file = recipe.host.read_file(interpreter)?;
        contents.push(Content {
            path: interpreter.clone(),
            source: recipe.host.path(interpreter),
            role: Role::Interpreter,
        });
        entries.push(Entry::executable(interpreter, interpreter_file));
        for library in loaded {
            if !library_dirs.contains(&library.dir) {
                library_dirs.push(library.dir.clone());
            }
            contents.push(Content {
                path: library.image_path(),
                source: library.source.clone(),
                role: Role::Library,
            });
            entries.push(Entry::file(
                &library.image_path(),
                library.bytes,
                library.mode,
            ));
        }
    }
    if let Some(bundle) = &recipe.ca_bundle {
        let bytes = program::read_capped(bundle, layer::MAX_FILE_BYTES)?;
        contents.push(Content {
            path: CA_BUNDLE_PATH.to_owned(),
            source: bundle.clone(),
            role: Role::CaBundle,
        });
        entries.push(Entry::file(CA_BUNDLE_PATH, bytes, 0o644));
    }
    let layer = Layer::new(entries)?;
    let config = archive::Config {
        architecture: recipe.architecture.clone(),
        entrypoint: &recipe.entrypoint,
        user: &recipe.user,
        ports: &recipe.ports,
        library_path: library_dirs,
        title: recipe.reference.repository(),
    };
    let archive = Archive::new(&recipe.reference, &config, layer)?;
    Ok(Image { contents, archive })
}

/// The OCI architecture of the machine this runs on.
///
/// # Errors
///
/// A machine whose architecture the OCI format names otherwise than this crate knows.
pub fn host_architecture() -> Result<Arch> {
    program::architecture_named(std::env::consts::ARCH).ok_or_else(|| Error::UnknownArchitecture {
        name: std::env::consts::ARCH.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;

    /// This test's own executable, dynamically linked, as the e2e's debug operators are.
    fn recipe() -> Recipe {
        let reference = Reference::parse("example-operator:0.1.0").expect("a reference");
        let binary = std::env::current_exe().expect("the test's executable");
        Recipe::new(reference, binary).expect("this machine's architecture")
    }

    /// The archive's files by path.
    fn files(archive: &Path) -> BTreeMap<String, Vec<u8>> {
        let bytes = std::fs::read(archive).expect("written");
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut files = BTreeMap::new();
        for entry in archive.entries().expect("a tarball") {
            let mut entry = entry.expect("an entry");
            let path = entry.path().expect("a path").display().to_string();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).expect("read");
            files.insert(path, bytes);
        }
        files
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("JSON")
    }

    fn blob<'a>(files: &'a BTreeMap<String, Vec<u8>>, digest: &str) -> &'a [u8] {
        let path = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
        files.get(&path).unwrap_or_else(|| panic!("no {path}"))
    }

    #[test]
    fn a_dynamic_binary_gets_its_loader_and_libraries_listed_and_copied_in() {
        let image = build(&recipe()).expect("an image");
        let roles: Vec<Role> = image.contents.iter().map(|c| c.role).collect();
        assert_eq!(roles[0], Role::Binary);
        assert_eq!(roles[1], Role::Interpreter);
        assert!(roles[2..].iter().all(|r| *r == Role::Library), "{roles:?}");
        assert!(
            image
                .contents
                .iter()
                .any(|c| c.path.ends_with("/libc.so.6")),
            "{:?}",
            image.contents
        );
        let dir = tempfile::tempdir().expect("a temporary folder");
        let out = dir.path().join("image.tar");
        image.write(&out).expect("written");
        let files = files(&out);
        let index = json(&files["index.json"]);
        let descriptor = &index["manifests"][0];
        assert_eq!(
            descriptor["annotations"]["io.containerd.image.name"],
            "docker.io/library/example-operator:0.1.0"
        );
        let manifest_bytes = blob(&files, descriptor["digest"].as_str().expect("a digest"));
        assert_eq!(
            crate::layer::digest(manifest_bytes),
            descriptor["digest"],
            "the manifest's blob is named by its digest"
        );
        let manifest = json(manifest_bytes);
        let config = json(blob(
            &files,
            manifest["config"]["digest"].as_str().expect("a digest"),
        ));
        assert_eq!(config["config"]["User"], USER);
        assert_eq!(config["config"]["Entrypoint"][0], ENTRYPOINT);
        assert!(
            config["config"]["Env"][0]
                .as_str()
                .is_some_and(|env| env.starts_with("LD_LIBRARY_PATH=/")),
            "{config}"
        );
        let layer_digest = manifest["layers"][0]["digest"].as_str().expect("a digest");
        let layer = blob(&files, layer_digest);
        assert_eq!(crate::layer::digest(layer), layer_digest);
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_digest);
        let mut in_layer = Vec::new();
        for entry in tar::Archive::new(layer).entries().expect("a tarball") {
            let entry = entry.expect("an entry");
            in_layer.push(format!("/{}", entry.path().expect("a path").display()));
        }
        for content in &image.contents {
            assert!(
                in_layer.contains(&content.path),
                "{} is not in {in_layer:?}",
                content.path
            );
        }
        let docker = json(&files["manifest.json"]);
        assert_eq!(docker[0]["RepoTags"][0], "example-operator:0.1.0");
        assert!(files.contains_key(docker[0]["Layers"][0].as_str().expect("a path")));
        assert!(files.contains_key("oci-layout"));
    }

    #[test]
    fn the_same_binary_gives_the_same_bytes() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let (first, second) = (dir.path().join("a.tar"), dir.path().join("b.tar"));
        build(&recipe())
            .expect("an image")
            .write(&first)
            .expect("written");
        build(&recipe())
            .expect("an image")
            .write(&second)
            .expect("written");
        assert_eq!(
            std::fs::read(&first).expect("read"),
            std::fs::read(&second).expect("read")
        );
        let mut retagged = recipe();
        retagged.reference = Reference::parse("example-operator:e2e-2").expect("a reference");
        let third = build(&retagged).expect("an image");
        let image = build(&recipe()).expect("an image");
        assert_eq!(
            third.id(),
            image.id(),
            "the configuration does not name the tag"
        );
        assert_eq!(third.manifest_digest(), image.manifest_digest());
    }

    #[test]
    fn a_ca_bundle_is_copied_in_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let bundle = dir.path().join("bundle.crt");
        std::fs::write(&bundle, "-----BEGIN CERTIFICATE-----\n").expect("written");
        let mut recipe = recipe();
        recipe.ca_bundle = Some(bundle.clone());
        let image = build(&recipe).expect("an image");
        let ca = image.contents.last().expect("contents");
        assert_eq!(
            (ca.path.as_str(), ca.role),
            (CA_BUNDLE_PATH, Role::CaBundle)
        );
        recipe.ca_bundle = Some(dir.path().join("missing.crt"));
        let error = build(&recipe).unwrap_err().to_string();
        assert!(error.contains("missing.crt"), "{error}");
    }

    #[test]
    fn a_failed_write_leaves_the_folder_as_it_was() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let image = build(&recipe()).expect("an image");
        // A folder where the archive should go: the rename fails after the temporary file
        // was written.
        let out = dir.path().join("image.tar");
        std::fs::create_dir(&out).expect("a folder in the way");
        std::fs::write(out.join("keep"), "").expect("written");
        let error = image.write(&out).unwrap_err().to_string();
        assert!(error.contains("image.tar"), "{error}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("an entry").file_name())
            .collect();
        assert_eq!(left, ["image.tar"], "no temporary file is left");
    }
}
