//! An image's name and tag, checked against the grammar container runtimes parse references
//! with (distribution's `reference` package), and normalized as they normalize it: a name
//! without a registry is Docker Hub's, and a one-part name there is under `library/`.

use std::fmt;

use crate::{Error, Result};

/// The longest name the grammar allows.
const MAX_NAME: usize = 255;
/// The longest tag.
const MAX_TAG: usize = 128;

/// A name and a tag, such as `example-operator:0.1.0` or `registry.local:5000/ops/x:v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    repository: String,
    tag: String,
}

impl Reference {
    /// The reference `repository:tag`.
    ///
    /// # Errors
    ///
    /// [`Error::Reference`] saying which part breaks the grammar.
    pub fn new(repository: &str, tag: &str) -> Result<Self> {
        let refused = |reason: String| Error::Reference {
            reference: format!("{repository}:{tag}"),
            reason,
        };
        check_repository(repository).map_err(refused)?;
        check_tag(tag).map_err(refused)?;
        Ok(Self {
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    }

    /// `name:tag`, split at the last `:` that is not part of a registry's port.
    ///
    /// # Errors
    ///
    /// [`Error::Reference`] for a reference without a tag or that breaks the grammar.
    pub fn parse(reference: &str) -> Result<Self> {
        let last = reference
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'));
        match last {
            Some((repository, tag)) => Self::new(repository, tag),
            None => Err(Error::Reference {
                reference: reference.to_owned(),
                reason: "it has no tag; give one, such as name:0.1.0".to_owned(),
            }),
        }
    }

    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The full reference a container runtime stores it under: `docker.io/library/name:tag`
    /// for `name:tag`.
    pub fn normalized(&self) -> String {
        let first = self.repository.split('/').next().unwrap_or_default();
        let has_registry = self.repository.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        let repository = match (has_registry, self.repository.contains('/')) {
            (true, _) => self.repository.clone(),
            (false, true) => format!("docker.io/{}", self.repository),
            (false, false) => format!("docker.io/library/{}", self.repository),
        };
        format!("{repository}:{}", self.tag)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.repository, self.tag)
    }
}

fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() || repository.len() > MAX_NAME {
        return Err(format!("a name has 1 to {MAX_NAME} characters"));
    }
    let mut components: Vec<&str> = repository.split('/').collect();
    let first = components[0];
    if components.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        check_registry(first)?;
        components.remove(0);
    }
    for component in components {
        check_path_component(component)?;
    }
    Ok(())
}

/// `host[:port]`: DNS labels of letters, digits and inner hyphens, and a numeric port.
fn check_registry(registry: &str) -> Result<(), String> {
    let (host, port) = match registry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !host.split('.').all(label_ok) {
        return Err(format!("{registry:?} is not a registry host"));
    }
    if port.is_some_and(|port| port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit())) {
        return Err(format!("{registry:?} has a port that is not a number"));
    }
    Ok(())
}

/// Lowercase letters and digits, with `.`, `_`, `__` or runs of `-` between them.
fn check_path_component(component: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "{component:?} is not a name component: lowercase letters and digits, separated by \
             `.`, `_`, `__` or `-`"
        )
    };
    let bytes = component.as_bytes();
    let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alphanumeric(&bytes[0]) || !alphanumeric(&bytes[bytes.len() - 1]) {
        return Err(bad());
    }
    let mut index = 0;
    while index < bytes.len() {
        if alphanumeric(&bytes[index]) {
            index += 1;
            continue;
        }
        let start = index;
        while index < bytes.len() && !alphanumeric(&bytes[index]) {
            index += 1;
        }
        let separator = &component[start..index];
        let dashes = separator.bytes().all(|b| b == b'-');
        if !(matches!(separator, "." | "_" | "__") || dashes) {
            return Err(bad());
        }
    }
    Ok(())
}

/// A word character first, then up to 127 word characters, `.` or `-`.
fn check_tag(tag: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_TAG
        && word(bytes[0])
        && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{tag:?} is not a tag: up to {MAX_TAG} letters, digits, `_`, `.` and `-`, not \
             starting with `.` or `-`"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_as_a_container_runtime_stores_them() {
        let cases = [
            (
                "example-operator:0.1.0",
                "docker.io/library/example-operator:0.1.0",
            ),
            ("ops/x:v1", "docker.io/ops/x:v1"),
            (
                "registry.local:5000/ops/x:v1",
                "registry.local:5000/ops/x:v1",
            ),
            ("localhost/x:e2e-1", "localhost/x:e2e-1"),
        ];
        for (given, normalized) in cases {
            let reference = Reference::parse(given).expect(given);
            assert_eq!(reference.normalized(), normalized);
            assert_eq!(reference.to_string(), given);
        }
    }

    #[test]
    fn a_name_or_tag_outside_the_grammar_is_refused_saying_which() {
        for bad in [
            "Upper:1",
            "x:",
            "x",
            "x:-1",
            "a..b:1",
            "-a:1",
            "a/:1",
            "reg:port/x:1",
            "x:a b",
            "x:1;rm",
        ] {
            let error = Reference::parse(bad).unwrap_err();
            assert!(matches!(error, Error::Reference { .. }), "{bad}: {error}");
        }
        let long = format!("x:{}", "a".repeat(129));
        assert!(Reference::parse(&long).is_err());
        assert!(Reference::parse("a__b.c-d---e:v1.2_3-x").is_ok());
    }
}
