//! Server-side CEL agreement per rule: for each rule a sample reaches, the sample and a
//! variant made to break that rule, each judged by kube-cel and by the API server.
//!
//! An API server says only accept or deny, per object, so agreement is defined per object.
//! A rule agrees when kube-cel passes the sample and the API server accepts it, and kube-cel
//! says the variant breaks the rule and the API server denies the variant for that rule: one
//! of its causes names the rule's field path and the rule's message (or `failed rule:
//! <rule>`). A rule the sample itself breaks (a sample the generator could not make keep
//! it) is judged on the sample alone, and agrees when the API server's refusal names it. The
//! variants come from [`operator_gen::cel::breaking`]; the dry runs are the server phase's
//! ([`super::server`]).

use operator_gen::cel::{
    Broken, Evaluated,
    breaking::{Trials, Variant},
};

/// What the API server said to one dry-run create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    Accepted,
    Refused(Refusal),
}

/// Why the API server refused an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The whole message, on one line.
    pub message: String,
    /// One cause per field the API server named (`status.details.causes`).
    pub causes: Vec<Cause>,
}

/// One cause of a refusal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Cause {
    /// The field, as the API server writes paths (`spec.rules[0]`, `spec.labels[key]`).
    pub field: String,
    /// `FieldValueInvalid`, `FieldValueForbidden`, …
    pub reason: String,
    /// `Invalid value: "object": <the rule's message>`.
    pub message: String,
}

/// One rule's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Agreement {
    /// kube-cel and the API server judged the sample and the variant alike.
    Agreed,
    /// They did not, with what each said of the two objects.
    Disagreed { kube_cel: String, server: String },
    /// No change in the variant builder's list breaks the rule, so only the sample was
    /// judged, which says nothing of the rule.
    NoVariant,
    /// The CRD never reached the API server (refused, or its crate did not compile).
    NotJudged,
}

/// One rule and its outcome.
#[derive(Debug, Clone)]
pub(super) struct Judged {
    pub rule: Evaluated,
    pub agreement: Agreement,
}

/// Rules by outcome; `tried` is `agreed + disagreed`, and every rule the samples evaluated is
/// tried, without a variant, or not judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub agreed: usize,
    pub disagreed: usize,
    pub no_variant: usize,
    pub not_judged: usize,
}

impl Tally {
    pub fn of(judged: &[Judged]) -> Self {
        let mut tally = Self::default();
        for rule in judged {
            match rule.agreement {
                Agreement::Agreed => tally.agreed += 1,
                Agreement::Disagreed { .. } => tally.disagreed += 1,
                Agreement::NoVariant => tally.no_variant += 1,
                Agreement::NotJudged => tally.not_judged += 1,
            }
        }
        tally
    }

    pub fn tried(&self) -> usize {
        self.agreed + self.disagreed
    }

    /// The table's column: `-` when no rule was tried.
    pub fn column(&self) -> String {
        if self.tried() + self.no_variant == 0 {
            return "-".to_owned();
        }
        let mut column = format!("{} of {} agreed", self.agreed, self.tried());
        if self.no_variant > 0 {
            column.push_str(&format!(", {} no variant", self.no_variant));
        }
        column
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.agreed += other.agreed;
        self.disagreed += other.disagreed;
        self.no_variant += other.no_variant;
        self.not_judged += other.not_judged;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tried, {} agreed, {} disagreed; {} with no breaking variant",
            self.tried(),
            self.agreed,
            self.disagreed,
            self.no_variant
        )?;
        if self.not_judged > 0 {
            write!(
                f,
                ", {} not judged (CRD not on the API server)",
                self.not_judged
            )?;
        }
        Ok(())
    }
}

/// The variants to dry-run after the sample, in the order [`judge`] takes their verdicts.
pub(super) fn variants(trials: &Trials) -> Vec<serde_json::Value> {
    trials
        .trials
        .iter()
        .filter_map(|trial| trial.variant.as_ref().map(|v| v.object.clone()))
        .collect()
}

/// Judges each rule of `trials` by the API server's verdicts on the sample and on each
/// variant, in the order of [`variants`]; `sample` is `None` when the CRD never reached it.
pub(super) fn judge(
    trials: &Trials,
    sample: Option<&Verdict>,
    variants: &[Verdict],
) -> Vec<Judged> {
    let mut verdicts = variants.iter();
    trials
        .trials
        .iter()
        .map(|trial| {
            let breaks_sample = trials.sample.broken.iter().any(|b| trial.rule.is(b));
            let agreement = match (&trial.variant, sample) {
                (None, Some(sample_verdict)) if breaks_sample => {
                    on_sample(&trial.rule, &trials.sample.broken, sample_verdict)
                }
                (None, _) if breaks_sample => Agreement::NotJudged,
                (None, _) => Agreement::NoVariant,
                (Some(_), None) => Agreement::NotJudged,
                (Some(variant), Some(sample_verdict)) => match verdicts.next() {
                    Some(variant_verdict) => agreement(
                        &trial.rule,
                        &trials.sample.broken,
                        sample_verdict,
                        variant,
                        variant_verdict,
                    ),
                    None => Agreement::NotJudged,
                },
            };
            Judged {
                rule: trial.rule.clone(),
                agreement,
            }
        })
        .collect()
}

/// Whether the API server judged the sample as kube-cel did on `rule`: it names the rule in
/// its refusal exactly when kube-cel says the sample breaks it. A refusal for other rules (of
/// a sample the generator could not make keep them) says nothing against this one.
fn sample_agrees(rule: &Evaluated, sample_broken: &[Broken], sample: &Verdict) -> bool {
    match (sample_broken.iter().find(|b| rule.is(b)), sample) {
        (None, Verdict::Accepted) => true,
        (None, Verdict::Refused(refusal)) => !names(refusal, rule, None),
        (Some(broken), Verdict::Refused(refusal)) => names(refusal, rule, Some(broken)),
        (Some(_), Verdict::Accepted) => false,
    }
}

/// One rule the sample itself breaks, judged on the sample alone.
fn on_sample(rule: &Evaluated, sample_broken: &[Broken], sample: &Verdict) -> Agreement {
    if sample_agrees(rule, sample_broken, sample) {
        return Agreement::Agreed;
    }
    Agreement::Disagreed {
        kube_cel: "sample breaks it".to_owned(),
        server: format!("sample {}", said(sample, rule)),
    }
}

/// One rule's agreement on the sample (which kube-cel broke as `sample_broken`) and on its
/// variant.
fn agreement(
    rule: &Evaluated,
    sample_broken: &[Broken],
    sample: &Verdict,
    variant: &Variant,
    server_variant: &Verdict,
) -> Agreement {
    let kube_sample = sample_broken.iter().find(|b| rule.is(b));
    let kube_variant = variant.broken.iter().find(|b| rule.is(b));
    let sample_agrees = sample_agrees(rule, sample_broken, sample);
    let variant_agrees = match (kube_variant, server_variant) {
        (Some(broken), Verdict::Refused(refusal)) => names(refusal, rule, Some(broken)),
        (None, Verdict::Accepted) => true,
        _ => false,
    };
    if sample_agrees && variant_agrees {
        return Agreement::Agreed;
    }
    let kube_cel = format!(
        "sample {}, variant ({}) {}",
        if kube_sample.is_some() {
            "breaks it"
        } else {
            "passes"
        },
        variant.change,
        if kube_variant.is_some() {
            "breaks it"
        } else {
            "passes"
        },
    );
    let server = format!(
        "sample {}, variant {}",
        said(sample, rule),
        said(server_variant, rule)
    );
    Agreement::Disagreed { kube_cel, server }
}

/// The API server's verdict, as the disagreement list shows it.
fn said(verdict: &Verdict, rule: &Evaluated) -> String {
    match verdict {
        Verdict::Accepted => "accepted".to_owned(),
        Verdict::Refused(refusal) if names(refusal, rule, None) => {
            format!("denied for this rule ({})", refusal.message)
        }
        Verdict::Refused(refusal) => format!("denied for another reason ({})", refusal.message),
    }
}

/// Whether the API server refused the sample for the rules kube-cel says it breaks, and for
/// nothing else: the sample breaks at least one rule, and each cause of the refusal names one
/// of them.
pub(super) fn explained(trials: &Trials, refusal: &Refusal) -> bool {
    let broken = &trials.sample.broken;
    let rules: Vec<&Evaluated> = (trials.trials.iter())
        .map(|trial| &trial.rule)
        .filter(|rule| broken.iter().any(|b| rule.is(b)))
        .collect();
    !rules.is_empty()
        && rules.len() == broken.len()
        && refusal.causes.iter().all(|cause| {
            let one = Refusal {
                message: String::new(),
                causes: vec![cause.clone()],
            };
            rules
                .iter()
                .any(|rule| names(&one, rule, broken.iter().find(|b| rule.is(b))))
        })
}

/// Whether the API server's refusal is for `rule`: a cause at its field whose message is the
/// rule's (its `message`, `failed rule: <rule>`, or, for a `messageExpression`, the message
/// kube-cel computed, in `broken`). A rule with `reason: FieldValueDuplicate` is reported
/// without its message, by the field and that reason alone.
fn names(refusal: &Refusal, rule: &Evaluated, broken: Option<&Broken>) -> bool {
    let texts: Vec<String> = [
        rule.message.as_deref().map(str::trim).map(str::to_owned),
        Some(format!("failed rule: {}", rule.rule.trim())),
        // An evaluation error is reported as `<error> evaluating rule: <rule>`.
        Some(format!("evaluating rule: {}", rule.rule.trim())),
        broken.map(|b| b.message.trim().to_owned()),
    ]
    .into_iter()
    .flatten()
    .filter(|text| !text.is_empty())
    .collect();
    let path = normalized(&rule.path);
    refusal.causes.iter().any(|cause| {
        normalized(&cause.field) == path
            && (texts
                .iter()
                .any(|text| cause.message.contains(text.as_str()))
                || (rule.reason.as_deref() == Some("FieldValueDuplicate")
                    && cause.reason == "FieldValueDuplicate"))
    })
}

/// A field path with list indices and map keys as plain segments, so that the API server's
/// `spec.labels[key]` and kube-cel's `spec.labels.key` compare equal; the API server writes
/// the object itself as `<nil>`.
fn normalized(path: &str) -> String {
    if path == "<nil>" {
        return String::new();
    }
    path.replace('[', ".")
        .replace(']', "")
        .trim_start_matches('.')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use operator_gen::cel::breaking::Trial;
    use serde_json::json;

    use super::*;

    fn rule() -> Evaluated {
        Evaluated {
            rule: "self.minReplicas <= self.maxReplicas".to_owned(),
            message: Some("min above max ".to_owned()),
            reason: None,
            path: "spec".to_owned(),
            node: "/spec".to_owned(),
        }
    }

    fn broken() -> Broken {
        Broken {
            rule: rule().rule,
            path: "spec".to_owned(),
            message: "min above max ".to_owned(),
        }
    }

    fn trials(variant: bool) -> Trials {
        Trials {
            sample: Default::default(),
            trials: vec![Trial {
                rule: rule(),
                variant: variant.then(|| Variant {
                    object: json!({"spec": {"minReplicas": 1, "maxReplicas": 0}}),
                    change: "`/spec/minReplicas` set to 1".to_owned(),
                    broken: vec![broken()],
                }),
            }],
        }
    }

    fn refused(field: &str, message: &str) -> Verdict {
        Verdict::Refused(Refusal {
            message: format!("Widget.example.com \"sample\" is invalid: {field}: {message}"),
            causes: vec![Cause {
                field: field.to_owned(),
                reason: "FieldValueInvalid".to_owned(),
                message: message.to_owned(),
            }],
        })
    }

    #[test]
    fn a_rule_agrees_when_the_server_accepts_the_sample_and_denies_the_variant_for_it() {
        let denied = refused("spec", "Invalid value: \"object\": min above max");
        let judged = judge(&trials(true), Some(&Verdict::Accepted), &[denied]);
        assert_eq!(judged[0].agreement, Agreement::Agreed);
        assert_eq!(
            Tally::of(&judged),
            Tally {
                agreed: 1,
                ..Tally::default()
            }
        );
    }

    #[test]
    fn a_variant_the_server_accepts_is_a_disagreement_naming_both_verdicts() {
        let judged = judge(
            &trials(true),
            Some(&Verdict::Accepted),
            &[Verdict::Accepted],
        );
        let Agreement::Disagreed { kube_cel, server } = &judged[0].agreement else {
            panic!("{:?}", judged[0].agreement)
        };
        assert_eq!(
            kube_cel,
            "sample passes, variant (`/spec/minReplicas` set to 1) breaks it"
        );
        assert_eq!(server, "sample accepted, variant accepted");
    }

    #[test]
    fn a_denial_for_another_field_or_message_is_not_a_denial_for_the_rule() {
        for other in [
            refused(
                "spec.minReplicas",
                "Invalid value: \"object\": min above max",
            ),
            refused("spec", "Invalid value: \"object\": something else"),
        ] {
            let judged = judge(&trials(true), Some(&Verdict::Accepted), &[other]);
            let Agreement::Disagreed { server, .. } = &judged[0].agreement else {
                panic!("{:?}", judged[0].agreement)
            };
            assert!(
                server.contains("variant denied for another reason"),
                "{server}"
            );
        }
    }

    #[test]
    fn a_rule_without_a_message_is_named_by_failed_rule_and_map_keys_match_either_form() {
        let mut rule = rule();
        rule.message = None;
        rule.path = "spec.labels.app".to_owned();
        let refusal = Refusal {
            message: String::new(),
            causes: vec![Cause {
                field: "spec.labels[app]".to_owned(),
                reason: "FieldValueInvalid".to_owned(),
                message: format!("Invalid value: \"string\": failed rule: {}", rule.rule),
            }],
        };
        assert!(names(&refusal, &rule, None));
    }

    #[test]
    fn a_rule_the_sample_breaks_is_judged_on_the_sample_alone() {
        let mut breaking = trials(false);
        breaking.sample.broken = vec![broken()];
        let denied = refused("spec", "Invalid value: \"object\": min above max");
        let judged = judge(&breaking, Some(&denied), &[]);
        assert_eq!(judged[0].agreement, Agreement::Agreed);
        let judged = judge(&breaking, Some(&Verdict::Accepted), &[]);
        assert_eq!(
            judged[0].agreement,
            Agreement::Disagreed {
                kube_cel: "sample breaks it".to_owned(),
                server: "sample accepted".to_owned()
            }
        );
        // A sample refused for another rule still agrees on this one.
        let other = refused("spec.other", "Invalid value: \"object\": other rule");
        let judged = judge(&trials(true), Some(&other), &[denied]);
        assert_eq!(judged[0].agreement, Agreement::Agreed);
    }

    #[test]
    fn a_sample_refused_for_the_rules_kube_cel_says_it_breaks_and_no_other_is_explained() {
        let mut breaking = trials(false);
        breaking.sample.broken = vec![broken()];
        let Verdict::Refused(denied) = refused("spec", "Invalid value: \"object\": min above max")
        else {
            unreachable!()
        };
        assert!(explained(&breaking, &denied));
        let mut more = denied.clone();
        more.causes.push(Cause {
            field: "spec.name".to_owned(),
            reason: "FieldValueInvalid".to_owned(),
            message: "Invalid value: \"\": spec.name in body should match '^a$'".to_owned(),
        });
        assert!(!explained(&breaking, &more));
        assert!(!explained(&trials(false), &denied));
    }

    #[test]
    fn rules_without_a_variant_or_a_server_are_counted_apart() {
        let judged = judge(&trials(false), Some(&Verdict::Accepted), &[]);
        assert_eq!(judged[0].agreement, Agreement::NoVariant);
        let judged = judge(&trials(true), None, &[]);
        assert_eq!(judged[0].agreement, Agreement::NotJudged);
        let mut tally = Tally::of(&judged);
        tally += Tally {
            no_variant: 1,
            ..Tally::default()
        };
        assert_eq!(
            tally.to_string(),
            "0 tried, 0 agreed, 0 disagreed; 1 with no breaking variant, 1 not judged (CRD not on the API server)"
        );
    }
}
