//! The node's iptables rules, and their removal.
//!
//! The node's own rules keep pod traffic on the machine: in the `mangle` table's FORWARD
//! (which kube-proxy's jumps in `filter` do not get ahead of), anything forwarded between the
//! bridge and any other interface is dropped. The kubelet and kube-proxy add their own
//! `KUBE-*` chains in every table of both families. `up` refuses to start when any `KUBE-*`
//! chain exists, so at `down` every such chain, and every rule that jumps to one, is the
//! node's to remove; tables that did not exist before `up` are removed too, once empty.

use std::{
    collections::BTreeMap,
    io::Write as _,
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

use crate::network::{BRIDGE, FORWARD_CHAIN};

/// The two families, by the command that saves and restores each.
const FAMILIES: [(&str, &str, &str); 2] = [
    ("iptables", "iptables-save", "iptables-restore"),
    ("ip6tables", "ip6tables-save", "ip6tables-restore"),
];

/// Whether a chain is the node's: Kubernetes' (`KUBE-…`) or its own.
fn is_nodes(chain: &str) -> bool {
    chain.starts_with("KUBE-") || chain == FORWARD_CHAIN
}

/// One family's rules, as `iptables-save` prints them, by table.
#[derive(Debug, Default)]
struct Saved {
    /// Each table's chains, and its rules (`-A chain …`), in order.
    tables: BTreeMap<String, (Vec<String>, Vec<String>)>,
}

impl Saved {
    fn parse(text: &str) -> Self {
        let mut saved = Self::default();
        let mut table = None;
        for line in text.lines() {
            if let Some(name) = line.strip_prefix('*') {
                table = Some(name.to_owned());
                saved.tables.entry(name.to_owned()).or_default();
            } else if let Some(table) = &table {
                let entry = saved.tables.entry(table.clone()).or_default();
                if let Some(chain) = line.strip_prefix(':') {
                    entry.0.push(
                        chain
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                } else if line.starts_with("-A ") {
                    entry.1.push(line.to_owned());
                }
            }
        }
        saved
    }

    /// The `iptables-restore --noflush` input that removes the node's chains and every rule
    /// jumping to them, table by table; empty when there is nothing of the node's.
    fn removal(&self) -> String {
        let mut script = String::new();
        for (table, (chains, rules)) in &self.tables {
            let ours: Vec<&String> = chains.iter().filter(|c| is_nodes(c)).collect();
            if ours.is_empty() {
                continue;
            }
            script.push_str(&format!("*{table}\n"));
            for rule in rules {
                let mut words = rule.split_whitespace().skip(1);
                let chain = words.next().unwrap_or_default();
                let jumps_to_ours = rule
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|pair| matches!(pair[0], "-j" | "-g") && is_nodes(pair[1]));
                // Rules inside the node's chains go with their chain's flush.
                if jumps_to_ours && !is_nodes(chain) {
                    script.push_str(&format!("-D{}\n", &rule[2..]));
                }
            }
            for chain in &ours {
                script.push_str(&format!("-F {chain}\n"));
            }
            for chain in &ours {
                script.push_str(&format!("-X {chain}\n"));
            }
            script.push_str("COMMIT\n");
        }
        script
    }

    /// Tables that hold a rule, or a chain of their own.
    fn in_use(&self) -> Vec<&String> {
        self.tables
            .iter()
            .filter(|(_, (chains, rules))| {
                !rules.is_empty() || chains.iter().any(|chain| !is_builtin(chain))
            })
            .map(|(table, _)| table)
            .collect()
    }
}

/// Whether a chain is one of the built-in ones, which exist with their table.
fn is_builtin(chain: &str) -> bool {
    matches!(
        chain,
        "PREROUTING" | "INPUT" | "FORWARD" | "OUTPUT" | "POSTROUTING"
    )
}

fn save(command: &str) -> Result<Saved> {
    let output = Command::new(command)
        .output()
        .with_context(|| format!("running {command}"))?;
    if !output.status.success() {
        bail!(
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(Saved::parse(&String::from_utf8_lossy(&output.stdout)))
}

/// The tables each family has now, for [`remove`] to know which the node made.
pub fn tables() -> Result<BTreeMap<String, Vec<String>>> {
    let mut tables = BTreeMap::new();
    for (family, save_command, _) in FAMILIES {
        // A machine without the command, before the node's packages are installed, has no
        // table of it. Only here: a node's own rules are never taken for absent.
        let saved = match save(save_command) {
            Err(error) if is_missing(&error) => Saved::default(),
            saved => saved?,
        };
        tables.insert(family.to_owned(), saved.tables.keys().cloned().collect());
    }
    Ok(tables)
}

/// Whether `error` is that of a command not installed.
fn is_missing(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|error| error.kind() == std::io::ErrorKind::NotFound)
}

/// Every `KUBE-…` chain of either family: another node's, when there is no node of ours.
pub fn kubernetes_chains() -> Result<Vec<String>> {
    let mut found = Vec::new();
    for (family, save_command, _) in FAMILIES {
        for (table, (chains, _)) in save(save_command)?.tables {
            found.extend(
                chains
                    .into_iter()
                    .filter(|chain| chain.starts_with("KUBE-"))
                    .map(|chain| format!("{family} {table} {chain}")),
            );
        }
    }
    Ok(found)
}

/// Adds the node's own rules: nothing forwarded between the bridge and another interface.
pub fn keep_pods_on_the_machine() -> Result<()> {
    let rules = format!(
        "*mangle\n:{FORWARD_CHAIN} - [0:0]\n-I FORWARD 1 -j {FORWARD_CHAIN}\n\
         -A {FORWARD_CHAIN} -i {BRIDGE} ! -o {BRIDGE} -j DROP\n\
         -A {FORWARD_CHAIN} ! -i {BRIDGE} -o {BRIDGE} -j DROP\nCOMMIT\n"
    );
    restore("iptables-restore", &rules)
}

/// Removes the node's chains and the rules that jump to them, in both families, then the
/// tables that `before` did not have and that are empty now.
pub fn remove(before: &BTreeMap<String, Vec<String>>) -> Result<()> {
    for (family, save_command, restore_command) in FAMILIES {
        let removal = save(save_command)?.removal();
        if !removal.is_empty() {
            restore(restore_command, &removal)?;
        }
        let saved = save(save_command)?;
        let in_use = saved.in_use();
        let had = before.get(family).cloned().unwrap_or_default();
        for table in saved.tables.keys() {
            if !had.contains(table) && !in_use.contains(&table) {
                delete_table(family, table);
            }
        }
    }
    Ok(())
}

/// Deletes an empty table the nf_tables backend of iptables made on first use. The legacy
/// backend's tables are the kernel's, and stay.
fn delete_table(family: &str, table: &str) {
    let nft_family = if family == "iptables" { "ip" } else { "ip6" };
    let _ = Command::new("nft")
        .args(["delete", "table", nft_family, table])
        .stderr(Stdio::null())
        .status();
}

fn restore(command: &str, rules: &str) -> Result<()> {
    let mut child = Command::new(command)
        .arg("--noflush")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {command}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(rules.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "{command} --noflush refused:\n{rules}{}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_command_not_installed_is_told_apart_from_one_that_failed() {
        let missing = save("/nonexistent/operator-gen/iptables-save").unwrap_err();
        assert!(is_missing(&missing), "{missing:#}");
        let failed = save("false").unwrap_err();
        assert!(!is_missing(&failed), "{failed:#}");
    }

    const SAVED: &str = "# Generated by iptables-save
*mangle
:PREROUTING ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
:OPERATOR-GEN-NODE - [0:0]
:OTHER - [0:0]
-A FORWARD -j OPERATOR-GEN-NODE
-A FORWARD -i eth0 -j OTHER
-A OPERATOR-GEN-NODE -i opgen0 ! -o opgen0 -j DROP
COMMIT
*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment \"block incoming localnet connections\" -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
COMMIT
";

    #[test]
    fn the_removal_drops_the_jumps_to_the_nodes_chains_then_the_chains_and_nothing_else() {
        let removal = Saved::parse(SAVED).removal();
        assert_eq!(
            removal,
            "*filter\n-D INPUT -j KUBE-FIREWALL\n-D OUTPUT -j KUBE-FIREWALL\n-F KUBE-FIREWALL\n\
             -X KUBE-FIREWALL\nCOMMIT\n*mangle\n-D FORWARD -j OPERATOR-GEN-NODE\n\
             -F KUBE-IPTABLES-HINT\n-F OPERATOR-GEN-NODE\n-X KUBE-IPTABLES-HINT\n\
             -X OPERATOR-GEN-NODE\nCOMMIT\n"
        );
        assert!(
            !removal.contains("OTHER"),
            "a chain that is not the node's stays"
        );
    }

    #[test]
    fn a_table_with_only_builtin_chains_and_no_rules_is_not_in_use() {
        let saved = Saved::parse(SAVED);
        let in_use = saved.in_use();
        assert!(in_use.iter().any(|t| *t == "mangle"));
        assert!(in_use.iter().any(|t| *t == "filter"));
        assert!(!in_use.iter().any(|t| *t == "nat"));
    }
}
