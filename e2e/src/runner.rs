//! The e2e's checks as libtest trials (libtest-mimic), so that one runs by name
//! (`cargo xtask e2e --exact 'example-operator::a deleted child is restored'`), a filter
//! runs a crate, and `--list` lists them.
//!
//! Trials run one at a time, in order, on one cluster. A crate's suite is made when its first
//! trial runs, deployed first even when its deploy trial was filtered out, and taken away
//! when the next crate's first trial runs or the run ends, even when its teardown trial was
//! filtered out, so that every crate starts on a clean cluster.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::Result;
use libtest_mimic::{Completion, Failed, Trial};
use operator_gen_cluster::OperatorCrate;

use crate::{
    sharding,
    suite::{Check, Deployed, Env, Suite, Verdict},
};

/// What one crate's trials run on.
pub(crate) struct Plan {
    pub operator: OperatorCrate,
    pub deployed: Deployed,
    pub checks: Vec<Check>,
}

/// Makes a crate's shared environment, for its logs' folder.
pub(crate) type MakeEnv = Box<dyn Fn(&str) -> Env + Send>;

/// The state the trials share: the plans, the suite of the crate under test, and the runtime's
/// sharding protocol's results once it ran.
pub(crate) struct Runner {
    plans: Vec<Plan>,
    make_env: MakeEnv,
    current: Option<Current>,
    sharding: Option<Vec<(&'static str, Result<String>)>>,
    /// The kubeconfig and cluster the sharding protocol runs on.
    sharding_env: Option<Env>,
    /// How long each trial took, by name, in the order they ran.
    timings: Vec<(String, Duration)>,
}

/// The crate whose trials run now.
struct Current {
    plan: usize,
    suite: Suite,
    /// Why its deploy failed, which every later trial of it reports.
    not_deployed: Option<String>,
    torn_down: bool,
}

impl Runner {
    pub(crate) fn new(plans: Vec<Plan>, make_env: MakeEnv) -> Self {
        Self {
            plans,
            make_env,
            current: None,
            sharding: None,
            sharding_env: None,
            timings: Vec::new(),
        }
    }

    /// Every trial: each crate's checks, named `<crate>::<check>` (`<crate> chart::…` for an
    /// install with the chart), then the runtime's sharding protocol.
    pub(crate) fn trials(runner: &Arc<Mutex<Self>>) -> Vec<Trial> {
        let state = runner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut trials = Vec::new();
        for (plan_index, plan) in state.plans.iter().enumerate() {
            let prefix = match plan.deployed {
                Deployed::Kustomize => plan.operator.name.clone(),
                Deployed::Chart => format!("{} chart", plan.operator.name),
            };
            for (check_index, check) in plan.checks.iter().enumerate() {
                let runner = Arc::clone(runner);
                let name = format!("{prefix}::{}", check.name);
                trials.push(Trial::ignorable_test(name.clone(), move || {
                    let mut runner = runner.lock().unwrap_or_else(PoisonError::into_inner);
                    let started = Instant::now();
                    let outcome = runner.run(plan_index, check_index);
                    runner.timings.push((name, started.elapsed()));
                    outcome
                }));
            }
        }
        for name in sharding::CHECKS {
            let runner = Arc::clone(runner);
            trials.push(Trial::ignorable_test(
                format!("operator-gen-runtime::{name}"),
                move || {
                    let mut runner = runner.lock().unwrap_or_else(PoisonError::into_inner);
                    runner.sharding_step(name)
                },
            ));
        }
        trials
    }

    /// What the trials took: each install's total, then the slowest checks, for the CI budget.
    pub(crate) fn print_timings(&self) {
        let mut per_install: BTreeMap<&str, Duration> = BTreeMap::new();
        for (name, took) in &self.timings {
            let install = name.split("::").next().unwrap_or_default();
            *per_install.entry(install).or_default() += *took;
        }
        let totals: Vec<String> = per_install
            .iter()
            .map(|(install, took)| format!("{install} {:.0} s", took.as_secs_f64()))
            .collect();
        println!("time per install: {}", totals.join(", "));
        let mut slowest: Vec<&(String, Duration)> = self.timings.iter().collect();
        slowest.sort_by_key(|(_, took)| std::cmp::Reverse(*took));
        for (name, took) in slowest.into_iter().take(10) {
            println!("  {:>6.1} s  {name}", took.as_secs_f64());
        }
    }

    /// Gives the runtime's sharding protocol the cluster it runs on.
    pub(crate) fn set_sharding_env(&mut self, env: Env) {
        self.sharding_env = Some(env);
    }

    fn run(&mut self, plan: usize, index: usize) -> Result<Completion, Failed> {
        self.switch_to(plan, index == 0);
        let Some(current) = self.current.as_mut() else {
            return Err("the crate's suite could not be made".into());
        };
        let check = self.plans[plan].checks[index];
        if let Some(reason) = &current.not_deployed
            && check.mode != crate::suite::Mode::AsItIs
        {
            return Err(format!("not run: deploying it failed: {reason}").into());
        }
        let verdict = current.suite.run(&check);
        if index + 1 == self.plans[plan].checks.len() {
            current.torn_down = true;
        }
        if index == 0
            && let Err(error) = &verdict
        {
            current.not_deployed = Some(format!("{error:#}"));
        }
        match verdict {
            Ok(Verdict::Passed(None)) => Ok(Completion::Completed),
            Ok(Verdict::Passed(Some((failed, reason)))) => {
                println!("\n    {failed} failed reconciles, as meant: {reason}");
                Ok(Completion::Completed)
            }
            Ok(Verdict::Skipped(reason)) => Ok(Completion::Ignored {
                reason: Some(reason.to_owned()),
            }),
            Err(error) => {
                current.suite.print_log_tails();
                Err(format!("{error:#}").into())
            }
        }
    }

    /// Makes `plan`'s suite the current one, after taking the previous crate away; deploys it
    /// first unless the trial about to run is its deploy.
    fn switch_to(&mut self, plan: usize, deploying: bool) {
        if self.current.as_ref().is_some_and(|c| c.plan == plan) {
            return;
        }
        self.finish();
        let operator = &self.plans[plan].operator;
        let env = (self.make_env)(&self.log_folder(plan));
        let mut suite = match Suite::new(env, operator) {
            Ok(suite) => suite,
            Err(error) => {
                println!(
                    "\n{}: the suite could not be made: {error:#}",
                    operator.name
                );
                return;
            }
        };
        let first = self.plans[plan].checks[0];
        let not_deployed = if deploying || first.mode == crate::suite::Mode::AsItIs {
            None
        } else {
            // The deploy is a trial of its own, filtered out here: the checks need it all the same.
            suite.run(&first).err().map(|error| format!("{error:#}"))
        };
        self.current = Some(Current {
            plan,
            suite,
            not_deployed,
            torn_down: false,
        });
    }

    /// The folder of `plan`'s logs: `target/e2e/<crate>` (`…-chart` for the chart's install).
    fn log_folder(&self, plan: usize) -> String {
        let plan = &self.plans[plan];
        match plan.deployed {
            Deployed::Kustomize => plan.operator.name.clone(),
            Deployed::Chart => format!("{}-chart", plan.operator.name),
        }
    }

    /// Takes the current crate away, when its teardown did not run as a trial.
    pub(crate) fn finish(&mut self) {
        let Some(mut current) = self.current.take() else {
            return;
        };
        if current.torn_down {
            return;
        }
        let Some(teardown) = self.plans[current.plan].checks.last().copied() else {
            return;
        };
        if teardown.mode == crate::suite::Mode::AsItIs
            && let Err(error) = current.suite.run(&teardown)
        {
            println!(
                "\n{}: taking it away failed: {error:#}",
                current.suite.name()
            );
        }
    }

    fn sharding_step(&mut self, name: &str) -> Result<Completion, Failed> {
        self.finish();
        if self.sharding.is_none() {
            let Some(env) = &self.sharding_env else {
                return Err("no cluster for the sharding protocol".into());
            };
            self.sharding = Some(sharding::run(
                env.kubectl.kubeconfig(),
                Some(Arc::clone(&env.cluster)),
            ));
        }
        let results = self.sharding.as_deref().unwrap_or_default();
        match results.iter().find(|(step, _)| *step == name) {
            Some((_, Ok(detail))) => {
                println!("\n    {detail}");
                Ok(Completion::Completed)
            }
            Some((_, Err(error))) => Err(format!("{error:#}").into()),
            None => Err("not reached: an earlier step of the protocol failed".into()),
        }
    }
}
