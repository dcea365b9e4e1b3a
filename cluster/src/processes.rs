//! The cluster's processes: each started in a process group of its own, logging to
//! `logs/<name>.log` and recorded in `<name>.pid` in the state folder, so that `down` (or the
//! next `up`, after a killed run) stops exactly those.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

/// The state folder's processes.
#[derive(Debug, Clone)]
pub struct Processes {
    state: PathBuf,
}

impl Processes {
    pub fn new(state: PathBuf) -> Self {
        Self { state }
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.state.join("logs").join(format!("{name}.log"))
    }

    fn pid_file(&self, name: &str) -> PathBuf {
        self.state.join(format!("{name}.pid"))
    }

    /// The pid of `name`, if it was started and that pid still names it. The pid file holds
    /// the pid and the process's start time: after a killed run, or with the machine
    /// restarted, the kernel may have given the pid to a process this never started, which
    /// must not be signalled.
    pub fn pid(&self, name: &str) -> Option<String> {
        let text = fs::read_to_string(self.pid_file(name)).ok()?;
        let names_it = match text.trim().split_once(' ') {
            Some((pid, started)) => start_time(pid).is_some_and(|now| now == started),
            // An older checkout's file, with the pid alone: the process's name must match.
            None => fs::read_to_string(format!("/proc/{}/comm", text.trim()))
                .is_ok_and(|comm| name.starts_with(comm.trim())),
        };
        let pid = text.trim().split(' ').next()?;
        names_it.then(|| pid.to_owned())
    }

    /// Starts `command` as `name`, in its own process group, its output appended to its log.
    pub fn spawn(&self, name: &str, mut command: Command) -> Result<()> {
        use std::os::unix::process::CommandExt;
        fs::create_dir_all(self.state.join("logs"))?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(name))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        let pid = child.id().to_string();
        let started = start_time(&pid).with_context(|| format!("{name} ended at once"))?;
        fs::write(self.pid_file(name), format!("{pid} {started}"))?;
        Ok(())
    }

    /// Whether `name` was started and still runs.
    pub fn running(&self, name: &str) -> bool {
        self.pid(name).is_some_and(|pid| alive(&pid))
    }

    /// Stops `name`: asks it to end, kills it once `grace` has passed, and waits until it is
    /// gone, so that its ports and files are free for the next start.
    pub fn stop(&self, name: &str, grace: Duration) {
        if let Some(pid) = self.pid(name) {
            stop_pid(&pid, grace);
        }
        let _ = fs::remove_file(self.pid_file(name));
    }
}

/// Stops process `pid`: SIGTERM, then SIGKILL once `grace` has passed, then waits for it.
pub fn stop_pid(pid: &str, grace: Duration) {
    let _ = Command::new("kill").args(["-TERM", pid]).status();
    let deadline = Instant::now() + grace;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive(pid) {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// When process `pid` started, in clock ticks after boot (`/proc/<pid>/stat`'s 22nd field),
/// if it exists: with the pid, what tells one process from a later one given the same pid.
fn start_time(pid: &str) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and `)`; the fields after it count
    // from the state, the third.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3).map(str::to_owned)
}

/// Whether process `pid` runs: whether any of its threads does. A component this process
/// started (`restart_apiserver` in the e2e) stays a zombie once it ends, since nothing waits
/// for it, and `kill -0` still finds a zombie: it counts as ended. Its main thread turns
/// zombie before the others have ended, and they hold its listening socket until they do: a
/// new API server started then could not bind its port.
pub fn alive(pid: &str) -> bool {
    let Ok(threads) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().any(|thread| {
        // `tid (comm) state …`, where comm may hold a `)`; Z is a zombie, X dead.
        fs::read_to_string(thread.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
        })
    })
}

/// Runs `command` and gives what it printed; when it fails, an error that names it as `what`
/// and says what it printed on stderr. `input`, when given, is its standard input.
pub fn checked(command: &mut Command, what: &str, input: Option<&[u8]>) -> Result<Vec<u8>> {
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {what}"))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        std::io::Write::write_all(&mut stdin, input)?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(output.stdout)
}

/// Waits up to `patience` until nothing listens on `port` of `address` any more.
pub fn wait_port_free(address: std::net::Ipv4Addr, port: u16, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience;
    while std::net::TcpListener::bind((address, port)).is_err() {
        if Instant::now() > deadline {
            bail!("{address}:{port} was still in use {patience:?} after its server was stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_alive_and_an_ended_one_is_not_even_unwaited() {
        let mut running = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = running.id().to_string();
        assert!(alive(&pid));
        // Ended but not waited for: a zombie, which `kill -0` would still find.
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(&pid), "a zombie counts as ended");
        let zombie = fs::read_to_string(format!("/proc/{pid}/stat")).expect("not yet reaped");
        assert!(zombie.contains(") Z"), "{zombie}");
        running.wait().expect("reaped");
        assert!(!alive(&pid));
    }

    #[test]
    fn a_pid_file_names_its_process_and_not_a_later_one_given_the_same_pid() {
        let state = std::env::temp_dir().join(format!("processes-{}", std::process::id()));
        let processes = Processes::new(state.clone());
        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        processes.spawn("sleeper", sleep).expect("sleep starts");
        let pid = processes.pid("sleeper").expect("its pid");
        assert!(processes.running("sleeper"));
        // The same pid, started at another time: what a killed run's pid file names once the
        // kernel has given its pid to a new process.
        let later = start_time(&pid)
            .expect("running")
            .parse::<u64>()
            .expect("ticks")
            + 1;
        fs::write(processes.pid_file("sleeper"), format!("{pid} {later}")).expect("written");
        assert_eq!(processes.pid("sleeper"), None, "not the process it names");
        processes.stop("sleeper", Duration::from_secs(1));
        assert!(
            alive(&pid),
            "a process the file does not name is not signalled"
        );
        stop_pid(&pid, Duration::from_secs(1));
        assert!(!alive(&pid));
        let _ = fs::remove_dir_all(state);
    }

    #[test]
    fn a_port_is_free_once_its_listener_is_gone_and_not_before() {
        let localhost = std::net::Ipv4Addr::LOCALHOST;
        let listener = std::net::TcpListener::bind((localhost, 0)).expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let held = wait_port_free(localhost, port, Duration::from_millis(200));
        assert!(held.is_err(), "a port something listens on is not free");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(listener);
        });
        wait_port_free(localhost, port, Duration::from_secs(5)).expect("free once closed");
        closer.join().expect("closed");
    }
}
