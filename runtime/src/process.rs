//! The process's own CPU, memory and file descriptors, as Prometheus' client libraries name
//! them (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...), which
//! prometheus-client does not collect itself.
//!
//! They are read from `/proc` at each scrape, so they cost nothing between scrapes. Elsewhere
//! than on Linux, where operators run, there is no `/proc` and nothing is reported.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

/// Clock ticks per second in `/proc/<pid>/stat`: `USER_HZ`, which Linux fixes at 100 for
/// userspace on the architectures operators run on.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of the process, from `/proc`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Reading {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
    /// Virtual memory, in bytes.
    pub virtual_bytes: u64,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// File descriptors open.
    pub open_fds: u64,
    /// The most file descriptors the process may open (its soft limit).
    pub max_fds: u64,
}

impl Reading {
    /// Reads this process from `/proc/self`; `None` where there is no `/proc`.
    pub fn now() -> Option<Self> {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let stat = read("/proc/self/stat")?;
        let status = read("/proc/self/status")?;
        let boot = read("/proc/stat")?;
        let limits = read("/proc/self/limits").unwrap_or_default();
        let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |fds| fds.count() as u64);
        Some(Self::parse(&stat, &status, &boot, &limits, open_fds))
    }

    /// A reading from the text of `/proc/self/stat`, `/proc/self/status`, `/proc/stat` and
    /// `/proc/self/limits`; a field that is missing reads as zero.
    pub fn parse(stat: &str, status: &str, boot: &str, limits: &str, open_fds: u64) -> Self {
        // The command name is in parentheses and may hold spaces or parentheses itself: the
        // fields are counted from after its last `)`, where field 3 (`state`) comes first.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let field = |number: usize| -> f64 {
            fields
                .get(number - 3)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        let kib = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0)
                * 1024
        };
        let boot_time: f64 = boot
            .lines()
            .find_map(|line| line.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0);
        let max_fds = limits
            .lines()
            .find(|line| line.starts_with("Max open files"))
            .and_then(|line| line.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Self {
            cpu_seconds: (field(14) + field(15)) / TICKS_PER_SECOND,
            resident_bytes: kib("VmRSS:"),
            virtual_bytes: kib("VmSize:"),
            start_time_seconds: boot_time + field(22) / TICKS_PER_SECOND,
            open_fds,
            max_fds,
        }
    }
}

/// Reports a [`Reading`] of this process at each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(reading) = Reading::now() else {
            return Ok(());
        };
        let counter = ConstCounter::new(reading.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu",
            "User and system CPU time spent",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?)?;
        let gauges: [(&str, &str, Option<&Unit>, f64); 5] = [
            (
                "process_resident_memory",
                "Resident memory size",
                Some(&Unit::Bytes),
                reading.resident_bytes as f64,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size",
                Some(&Unit::Bytes),
                reading.virtual_bytes as f64,
            ),
            (
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(&Unit::Seconds),
                reading.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                None,
                reading.open_fds as f64,
            ),
            (
                "process_max_fds",
                "Most file descriptors the process may open",
                None,
                reading.max_fds as f64,
            ),
        ];
        for (name, help, unit, value) in gauges {
            ConstGauge::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                unit,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_text_is_read_field_by_field_even_with_parentheses_in_the_name() {
        // pid, (comm), then state (field 3) ... utime (14), stime (15) ... starttime (22).
        let stat = "4242 (my (odd) op) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 8 0 12345 1000 10";
        let status = "Name:\tmy\nVmSize:\t  204800 kB\nVmRSS:\t   51200 kB\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n";
        let reading = Reading::parse(stat, status, boot, limits, 12);
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: 3.0,
                resident_bytes: 51200 * 1024,
                virtual_bytes: 204800 * 1024,
                start_time_seconds: 1_700_000_000.0 + 123.45,
                open_fds: 12,
                max_fds: 1_048_576,
            }
        );
    }

    #[test]
    fn unreadable_text_reads_as_zero_rather_than_failing_a_scrape() {
        assert_eq!(Reading::parse("", "", "", "", 0), Reading::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_from_proc() {
        let reading = Reading::now().expect("Linux has /proc");
        assert!(reading.resident_bytes > 0 && reading.virtual_bytes >= reading.resident_bytes);
        assert!(reading.open_fds > 0 && reading.max_fds >= reading.open_fds);
        assert!(reading.start_time_seconds > 1_600_000_000.0);
    }
}
