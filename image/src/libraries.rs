//! The shared libraries a dynamically linked program loads, found as the dynamic loader finds
//! them on the machine that built it: the folders the program names (`DT_RUNPATH` or
//! `DT_RPATH`), then `/etc/ld.so.conf`'s, then the system's own. Each library's own needs are
//! followed too, and a candidate for another machine or class is skipped, as the loader skips
//! it.
//!
//! The image has no `ld.so.cache`, so its loader would not look in `ld.so.conf`'s folders: the
//! image's configuration names every folder a library was copied into in `LD_LIBRARY_PATH`.

use std::path::{Path, PathBuf};

use crate::{
    Error, Result,
    program::{self, Identity, Linking, Program},
};

/// The most libraries one program may load, counting every library's own: a generated
/// operator's debug build loads four.
pub const MAX_LIBRARIES: usize = 64;

/// The largest library an image takes.
pub const MAX_LIBRARY_BYTES: u64 = 256 << 20;

/// The most `include` levels and files `ld.so.conf` may spread over.
const MAX_CONF_FILES: usize = 64;
const MAX_CONF_BYTES: u64 = 64 << 10;

/// The file system libraries are looked for in: `/` for this machine, or a folder that stands
/// for one, as in tests.
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

/// A library found for the program, read whole.
#[derive(Debug, Clone)]
pub struct Library {
    /// The name the program (or another library) needs it by (`libc.so.6`).
    pub name: String,
    /// The folder it was found in, as the loader searched it (`/lib/x86_64-linux-gnu`): where
    /// it goes in the image too.
    pub dir: String,
    /// The file it was read from, on the host.
    pub source: PathBuf,
    pub bytes: Vec<u8>,
    /// Its permission bits, without write for others or any special bit.
    pub mode: u32,
}

impl Library {
    /// Its path in the image.
    pub fn image_path(&self) -> String {
        format!("{}/{}", self.dir.trim_end_matches('/'), self.name)
    }
}

impl Host {
    /// This machine.
    pub fn machine() -> Self {
        Self {
            root: PathBuf::from("/"),
        }
    }

    /// The file system below `root`, standing for a machine's.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the host's absolute path `path` is.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Reads the host's file at the absolute `path`, following links as the loader does.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        program::read_capped(&self.path(path), MAX_LIBRARY_BYTES)
    }

    /// The folders `/etc/ld.so.conf` names, with the files it includes, in order.
    fn configured_dirs(&self) -> Vec<String> {
        let mut dirs = Vec::new();
        let mut files = vec!["/etc/ld.so.conf".to_owned()];
        let mut read = 0;
        while let Some(file) = files.pop() {
            read += 1;
            if read > MAX_CONF_FILES {
                break;
            }
            let Ok(bytes) = program::read_capped(&self.path(&file), MAX_CONF_BYTES) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let mut included = Vec::new();
            for line in text.lines() {
                let line = line.split('#').next().unwrap_or_default().trim();
                if let Some(pattern) = line.strip_prefix("include") {
                    included.extend(self.matching(pattern.trim()));
                } else if line.starts_with('/') {
                    dirs.push(line.to_owned());
                }
            }
            // Depth first, in the order they were named.
            files.extend(included.into_iter().rev());
        }
        dirs
    }

    /// The files `pattern` names: a path whose last component may hold one `*`, as
    /// `include /etc/ld.so.conf.d/*.conf` does, sorted as glob(3) sorts them.
    fn matching(&self, pattern: &str) -> Vec<String> {
        let Some((dir, name)) = pattern.rsplit_once('/') else {
            return Vec::new();
        };
        let Some((prefix, suffix)) = name.split_once('*') else {
            return vec![pattern.to_owned()];
        };
        let Ok(entries) = std::fs::read_dir(self.path(dir)) else {
            return Vec::new();
        };
        let mut found: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|file| {
                file.len() >= prefix.len() + suffix.len()
                    && file.starts_with(prefix)
                    && file.ends_with(suffix)
            })
            .map(|file| format!("{dir}/{file}"))
            .take(MAX_CONF_FILES)
            .collect();
        found.sort();
        found
    }
}

/// The system's own library folders for `identity`, after `ld.so.conf`'s: the multiarch
/// folders of Debian and Ubuntu, then the plain ones.
fn system_dirs(identity: Identity) -> Vec<String> {
    let triplet = match (identity.machine, identity.is_64) {
        (goblin::elf::header::EM_X86_64, true) => Some("x86_64-linux-gnu"),
        (goblin::elf::header::EM_AARCH64, true) => Some("aarch64-linux-gnu"),
        (goblin::elf::header::EM_386, false) => Some("i386-linux-gnu"),
        (goblin::elf::header::EM_ARM, false) => Some("arm-linux-gnueabihf"),
        _ => None,
    };
    let mut dirs = Vec::new();
    if let Some(triplet) = triplet {
        dirs.push(format!("/lib/{triplet}"));
        dirs.push(format!("/usr/lib/{triplet}"));
    }
    if identity.is_64 {
        dirs.extend(["/lib64".to_owned(), "/usr/lib64".to_owned()]);
    }
    dirs.extend(["/lib".to_owned(), "/usr/lib".to_owned()]);
    dirs
}

/// Every library `program` loads, its own needs first, then each library's, each once, in
/// the order the loader would load them (breadth first).
///
/// # Errors
///
/// [`Error::MissingLibrary`] for a library found in none of the folders searched, naming who
/// needs it and where it was looked for; [`Error::TooManyLibraries`] past [`MAX_LIBRARIES`].
pub fn resolve(program: &Program, host: &Host) -> Result<Vec<Library>> {
    let Linking::Dynamic { needed, search, .. } = program.linking() else {
        return Ok(Vec::new());
    };
    let identity = program.identity();
    let configured = host.configured_dirs();
    let system = system_dirs(identity);
    let origin = |path: &Path| {
        path.parent()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default()
    };
    let mut queue: Vec<(String, Vec<String>, PathBuf)> = needed
        .iter()
        .map(|name| {
            (
                name.clone(),
                expanded(search, &origin(program.path())),
                program.path().to_owned(),
            )
        })
        .collect();
    let mut found: Vec<Library> = Vec::new();
    let mut next = 0;
    while next < queue.len() {
        let (name, own, needed_by) = queue[next].clone();
        next += 1;
        if found.iter().any(|library| library.name == name) {
            continue;
        }
        if found.len() >= MAX_LIBRARIES {
            return Err(Error::TooManyLibraries {
                path: program.path().to_owned(),
                limit: MAX_LIBRARIES,
            });
        }
        let dirs: Vec<String> = own
            .iter()
            .chain(&configured)
            .chain(&system)
            .cloned()
            .collect();
        let library = find(host, &name, &dirs, identity).ok_or_else(|| Error::MissingLibrary {
            needed_by: needed_by.clone(),
            library: name.clone(),
            searched: dirs.iter().map(|dir| host.path(dir)).collect(),
        })?;
        let facts = program::inspect(&library.source, &library.bytes)?;
        let search = expanded(&facts.search, &library.dir);
        queue.extend(
            facts
                .needed
                .into_iter()
                .map(|needed| (needed, search.clone(), library.source.clone())),
        );
        found.push(library);
    }
    Ok(found)
}

/// `dirs` with `$ORIGIN` (and `${ORIGIN}`) replaced by `origin`; folders naming the loader's
/// other variables (`$LIB`, `$PLATFORM`), which depend on the machine it runs on, are left out.
fn expanded(dirs: &[String], origin: &str) -> Vec<String> {
    dirs.iter()
        .map(|dir| dir.replace("${ORIGIN}", origin).replace("$ORIGIN", origin))
        .filter(|dir| dir.starts_with('/') && !dir.contains('$'))
        .collect()
}

/// `dir` with `.` and `..` resolved as text: `$ORIGIN/../lib` gives such a folder, and an
/// image path may hold neither.
fn lexically_normal(dir: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in dir.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The first file named `name` in `dirs` that is an ELF file of `identity`'s machine.
fn find(host: &Host, name: &str, dirs: &[String], identity: Identity) -> Option<Library> {
    use std::os::unix::fs::PermissionsExt as _;
    if name.contains('/') {
        // A needed path, not a name: used as it is.
        let (dir, file) = name.rsplit_once('/')?;
        return find(host, file, &[dir.to_owned()], identity);
    }
    dirs.iter().find_map(|dir| {
        let source = host.path(dir).join(name);
        let metadata = std::fs::metadata(&source).ok()?;
        if !metadata.is_file() {
            return None;
        }
        let bytes = program::read_capped(&source, MAX_LIBRARY_BYTES).ok()?;
        let facts = program::inspect(&source, &bytes).ok()?;
        (facts.identity == identity).then(|| Library {
            name: name.to_owned(),
            dir: lexically_normal(dir),
            source,
            bytes,
            mode: metadata.permissions().mode() & 0o755,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_program() -> Program {
        Program::read(&std::env::current_exe().expect("the test's executable")).expect("readable")
    }

    #[test]
    fn this_tests_libraries_are_found_with_libc_among_them() {
        let libraries = resolve(&this_program(), &Host::machine()).expect("resolved");
        let names: Vec<&str> = libraries.iter().map(|l| l.name.as_str()).collect();
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        for library in &libraries {
            assert!(library.dir.starts_with('/'), "{library:?}");
            assert!(library.source.is_file(), "{library:?}");
            assert!(!library.bytes.is_empty());
        }
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "each library once: {names:?}");
    }

    #[test]
    fn a_library_missing_from_the_host_is_named_with_where_it_was_looked_for() {
        let empty = tempfile::tempdir().expect("a temporary folder");
        let error = resolve(&this_program(), &Host::at(empty.path())).unwrap_err();
        let Error::MissingLibrary {
            library, searched, ..
        } = &error
        else {
            panic!("{error}");
        };
        assert!(library.starts_with("lib"), "{library}");
        assert!(
            searched.iter().all(|dir| dir.starts_with(empty.path())),
            "{searched:?}"
        );
        let message = error.to_string();
        assert!(message.contains("needs"), "{message}");
        assert!(message.contains("static"), "{message}");
    }

    #[test]
    fn ld_so_conf_includes_are_followed_in_order_and_its_folders_come_first() {
        let root = tempfile::tempdir().expect("a temporary folder");
        let etc = root.path().join("etc");
        std::fs::create_dir_all(etc.join("ld.so.conf.d")).expect("folders");
        std::fs::write(
            etc.join("ld.so.conf"),
            "# comment\ninclude /etc/ld.so.conf.d/*.conf\n/opt/last\n",
        )
        .expect("written");
        std::fs::write(etc.join("ld.so.conf.d/b.conf"), "/opt/b\n").expect("written");
        std::fs::write(etc.join("ld.so.conf.d/a.conf"), "/opt/a # why\n").expect("written");
        std::fs::write(etc.join("ld.so.conf.d/ignored.txt"), "/opt/no\n").expect("written");
        let dirs = Host::at(root.path()).configured_dirs();
        assert_eq!(dirs, ["/opt/last", "/opt/a", "/opt/b"]);
    }

    #[test]
    fn a_library_of_another_machine_is_skipped_as_the_loader_skips_it() {
        let this = this_program();
        let libraries = resolve(&this, &Host::machine()).expect("resolved");
        let libc = libraries
            .iter()
            .find(|l| l.name.starts_with("libc.so"))
            .expect("libc");
        let root = tempfile::tempdir().expect("a temporary folder");
        let first = root.path().join("first");
        let second = root.path().join("second");
        std::fs::create_dir_all(&first).expect("folder");
        std::fs::create_dir_all(&second).expect("folder");
        let mut foreign = libc.bytes.clone();
        foreign[18..20].copy_from_slice(&goblin::elf::header::EM_RISCV.to_le_bytes());
        std::fs::write(first.join(&libc.name), foreign).expect("written");
        std::fs::write(second.join(&libc.name), &libc.bytes).expect("written");
        let found = find(
            &Host::at(root.path()),
            &libc.name,
            &["/first".to_owned(), "/second".to_owned()],
            this.identity(),
        )
        .expect("the second");
        assert_eq!(found.dir, "/second");
    }

    #[test]
    fn a_folder_with_dots_is_normalized_as_text() {
        assert_eq!(lexically_normal("/app/bin/../lib/./x/"), "/app/lib/x");
        assert_eq!(lexically_normal("/../../lib"), "/lib");
    }

    #[test]
    fn origin_is_the_needing_files_folder_and_machine_dependent_folders_are_dropped() {
        let dirs = [
            "$ORIGIN/../lib",
            "${ORIGIN}/x",
            "/opt/$LIB",
            "relative",
            "/abs",
        ]
        .map(str::to_owned);
        assert_eq!(
            expanded(&dirs, "/app/bin"),
            ["/app/bin/../lib", "/app/bin/x", "/abs"]
        );
    }
}
