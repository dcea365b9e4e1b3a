//! The operator's binary, read from its ELF headers: which machine it is for, and whether it
//! is linked statically or names a loader and the libraries it needs.

use std::{
    io::Read as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

use goblin::elf::{Elf, header};
use oci_spec::image::Arch;

use crate::{Error, Result};

/// The largest binary an image takes: a debug build of a generated operator is about 110 MB.
pub const MAX_BINARY_BYTES: u64 = 1 << 30;

/// An ELF program, read whole.
#[derive(Debug)]
pub struct Program {
    path: PathBuf,
    bytes: Vec<u8>,
    identity: Identity,
    linking: Linking,
}

/// What a loaded ELF file must share with the program: its machine, class and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub machine: u16,
    pub is_64: bool,
    pub little_endian: bool,
}

/// How a program is linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linking {
    /// Statically: it needs nothing but itself.
    Static,
    /// Dynamically: the loader (`PT_INTERP`) and the libraries (`DT_NEEDED`) it names, and
    /// where it asks them to be looked for first (`DT_RUNPATH`, or the older `DT_RPATH`).
    Dynamic {
        interpreter: String,
        needed: Vec<String>,
        search: Vec<String>,
    },
}

impl Program {
    /// Reads and checks the program at `path`: it exists, is executable, and is an ELF
    /// executable (not a library or an object file).
    ///
    /// # Errors
    ///
    /// [`Error::Read`], [`Error::TooLarge`], [`Error::NotExecutable`], [`Error::NotElf`],
    /// [`Error::Malformed`] or [`Error::NotAProgram`], each naming `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let metadata = std::fs::metadata(path).map_err(|error| read_error(path, &error))?;
        if !metadata.is_file() {
            return Err(Error::Read {
                path: path.to_owned(),
                reason: "it is not a regular file".to_owned(),
            });
        }
        if metadata.permissions().mode() & 0o111 == 0 {
            return Err(Error::NotExecutable {
                path: path.to_owned(),
            });
        }
        let bytes = read_capped(path, MAX_BINARY_BYTES)?;
        let facts = inspect(path, &bytes)?;
        if let Some(what) = facts.not_a_program {
            return Err(Error::NotAProgram {
                path: path.to_owned(),
                what,
            });
        }
        let linking = match facts.interpreter {
            None if facts.needed.is_empty() => Linking::Static,
            None => {
                return Err(Error::Malformed {
                    path: path.to_owned(),
                    reason: "it names shared libraries but no loader (PT_INTERP)".to_owned(),
                });
            }
            Some(interpreter) => Linking::Dynamic {
                interpreter,
                needed: facts.needed,
                search: facts.search,
            },
        };
        Ok(Self {
            path: path.to_owned(),
            bytes,
            identity: facts.identity,
            linking,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn identity(&self) -> Identity {
        self.identity
    }

    pub fn linking(&self) -> &Linking {
        &self.linking
    }

    /// Refuses a program built for another machine than `wanted`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongArchitecture`], or [`Error::UnsupportedMachine`] for a machine the OCI
    /// format has no name for here.
    pub fn expect_architecture(&self, wanted: Arch) -> Result<()> {
        let found = oci_architecture(self.identity).ok_or(Error::UnsupportedMachine {
            path: self.path.clone(),
            machine: self.identity.machine,
        })?;
        if found == wanted {
            return Ok(());
        }
        Err(Error::WrongArchitecture {
            path: self.path.clone(),
            found: found.to_string(),
            wanted: wanted.to_string(),
        })
    }
}

/// What the ELF headers of a file say: enough to load it, or to refuse it.
#[derive(Debug)]
pub(crate) struct ElfFacts {
    pub identity: Identity,
    /// What kind of ELF file it is: `None` for an executable, else what it is instead.
    pub not_a_program: Option<&'static str>,
    pub interpreter: Option<String>,
    pub needed: Vec<String>,
    /// `DT_RUNPATH`'s folders, or the older `DT_RPATH`'s when there is no `DT_RUNPATH`.
    pub search: Vec<String>,
}

/// The ELF headers of `bytes`, read from `path`.
pub(crate) fn inspect(path: &Path, bytes: &[u8]) -> Result<ElfFacts> {
    if !bytes.starts_with(header::ELFMAG) {
        return Err(Error::NotElf {
            path: path.to_owned(),
        });
    }
    let elf = Elf::parse(bytes).map_err(|error| Error::Malformed {
        path: path.to_owned(),
        reason: error.to_string(),
    })?;
    let not_a_program = match elf.header.e_type {
        header::ET_EXEC => None,
        // A position-independent executable is ET_DYN too: it names a loader, or carries the
        // PIE flag when it is static (goblin's `is_lib` is false then).
        header::ET_DYN if elf.interpreter.is_some() || !elf.is_lib => None,
        header::ET_DYN => Some("a shared library"),
        header::ET_REL => Some("an object file"),
        header::ET_CORE => Some("a core dump"),
        _ => Some("an ELF file of an unknown type"),
    };
    // The loader reads DT_RPATH only when there is no DT_RUNPATH.
    let search = if elf.runpaths.is_empty() {
        &elf.rpaths
    } else {
        &elf.runpaths
    };
    Ok(ElfFacts {
        identity: Identity {
            machine: elf.header.e_machine,
            is_64: elf.is_64,
            little_endian: elf.little_endian,
        },
        not_a_program,
        interpreter: elf.interpreter.map(str::to_owned),
        needed: elf.libraries.iter().map(|&name| name.to_owned()).collect(),
        search: search
            .iter()
            .flat_map(|paths| paths.split(':'))
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// The OCI architecture of an ELF identity, where this crate knows it.
fn oci_architecture(identity: Identity) -> Option<Arch> {
    Some(
        match (identity.machine, identity.is_64, identity.little_endian) {
            (header::EM_X86_64, true, true) => Arch::Amd64,
            (header::EM_AARCH64, true, true) => Arch::ARM64,
            (header::EM_386, false, true) => Arch::i386,
            (header::EM_ARM, false, true) => Arch::ARM,
            (header::EM_RISCV, true, true) => Arch::RISCV64,
            (header::EM_PPC64, true, true) => Arch::PowerPC64le,
            (header::EM_S390, true, false) => Arch::s390x,
            _ => return None,
        },
    )
}

/// The OCI architecture Rust's `std::env::consts::ARCH` (or a user) names: `x86_64` or
/// `amd64`, `aarch64` or `arm64`, and the others the OCI format has.
pub fn architecture_named(name: &str) -> Option<Arch> {
    Some(match name {
        "x86_64" | "amd64" => Arch::Amd64,
        "aarch64" | "arm64" => Arch::ARM64,
        "x86" | "386" => Arch::i386,
        "arm" => Arch::ARM,
        "riscv64" => Arch::RISCV64,
        "powerpc64" | "ppc64le" => Arch::PowerPC64le,
        "s390x" => Arch::s390x,
        _ => return None,
    })
}

/// Reads the file at `path` whole, refusing one over `limit` bytes without reading past it.
///
/// # Errors
///
/// [`Error::Read`] or [`Error::TooLarge`], naming `path`.
pub fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|error| read_error(path, &error))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| read_error(path, &error))?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

fn read_error(path: &Path, error: &std::io::Error) -> Error {
    Error::Read {
        path: path.to_owned(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own executable: a dynamically linked program of this machine.
    fn this_program() -> PathBuf {
        std::env::current_exe().expect("the test's executable")
    }

    #[test]
    fn this_test_is_a_dynamic_program_of_this_machine() {
        let program = Program::read(&this_program()).expect("readable");
        program
            .expect_architecture(crate::host_architecture().expect("known"))
            .expect("this machine's");
        match program.linking() {
            Linking::Dynamic {
                interpreter,
                needed,
                ..
            } => {
                assert!(interpreter.starts_with('/'), "{interpreter}");
                assert!(
                    needed.iter().any(|n| n.starts_with("libc.so")),
                    "{needed:?}"
                );
            }
            Linking::Static => panic!("a test executable links glibc dynamically"),
        }
    }

    #[test]
    fn a_program_for_another_machine_is_refused_naming_both() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut bytes = std::fs::read(this_program()).expect("readable");
        // e_machine, at offset 18 of the ELF header, little-endian here.
        let other = if std::env::consts::ARCH == "aarch64" {
            header::EM_X86_64
        } else {
            header::EM_AARCH64
        };
        bytes[18..20].copy_from_slice(&other.to_le_bytes());
        let path = dir.path().join("foreign");
        write_executable(&path, &bytes);
        let program = Program::read(&path).expect("still an ELF program");
        let error = program
            .expect_architecture(crate::host_architecture().expect("known"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("foreign"), "{error}");
        assert!(error.contains("is built for"), "{error}");
    }

    #[test]
    fn a_file_without_the_execute_bit_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("operator");
        std::fs::copy(this_program(), &path).expect("copied");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = Program::read(&path).unwrap_err();
        assert!(matches!(error, Error::NotExecutable { .. }), "{error}");
        assert!(error.to_string().contains("chmod +x"), "{error}");
    }

    #[test]
    fn a_script_or_a_missing_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let script = dir.path().join("run.sh");
        write_executable(&script, b"#!/bin/sh\nexec true\n");
        let error = Program::read(&script).unwrap_err();
        assert!(matches!(error, Error::NotElf { .. }), "{error}");
        assert!(error.to_string().contains("run.sh"), "{error}");
        let missing = dir.path().join("not-built");
        let error = Program::read(&missing).unwrap_err().to_string();
        assert!(error.contains("not-built"), "{error}");
    }

    #[test]
    fn a_shared_library_is_not_taken_for_a_program() {
        let program = Program::read(&this_program()).expect("readable");
        let libraries =
            crate::libraries::resolve(&program, &crate::libraries::Host::machine()).expect("found");
        // libc.so.6 names a loader and runs; a library without one is only a library.
        let library = libraries
            .iter()
            .find(|l| inspect(&l.source, &l.bytes).is_ok_and(|facts| facts.interpreter.is_none()))
            .expect("a library without a loader, such as libgcc_s or libm");
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join(&library.name);
        write_executable(&path, &library.bytes);
        let error = Program::read(&path).unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotAProgram {
                    what: "a shared library",
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn a_truncated_elf_file_is_malformed_not_a_panic() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let bytes = std::fs::read(this_program()).expect("readable");
        let path = dir.path().join("truncated");
        write_executable(&path, &bytes[..200]);
        let error = Program::read(&path).unwrap_err();
        assert!(matches!(error, Error::Malformed { .. }), "{error}");
    }

    fn write_executable(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).expect("written");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}
