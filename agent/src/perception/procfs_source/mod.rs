//! The procfs half of the sampler: one [`ProcSnapshot`] per tick, and [`procfs_features`]
//! turning two consecutive snapshots into rates and shares.
//!
//! - [`snapshot`]: the system-wide files parsed into one [`ProcSnapshot`] (pure: text in,
//!   totals out);
//! - [`processes`]: the per-process scan ([`ProcessScanner`]): the busiest, second-busiest and
//!   most-I/O processes since the previous scan;
//! - [`features`]: two snapshots → the schema's procfs features;
//! - [`reader`]: [`ProcReader`], the I/O: keeps the files open and reads them once per tick;
//! - [`glance`]: three of the system files only, as activity rates, and when they moved
//!   (what `asa run` reads between full ticks while its vote is steady);
//! - `pread`: reading an open /proc file from offset 0 (the leaf the scan and the reader share).
//!
//! Cost per tick: /proc/stat, /proc/meminfo, /proc/diskstats, /proc/net/dev, /proc/net/snmp
//! and /proc/loadavg are each read once into reused buffers and parsed with `procfs-core`;
//! every /proc/<pid>/stat is read exactly once (CPU time, minor faults, threads and RSS), and
//! besides that only /proc/<pid>/io of the few busiest and newest processes
//! ([`IO_READS_PER_SCAN`], [`IO_NEW_READS_PER_SCAN`]), for the I/O rates of the busiest
//! process and of the process doing the most I/O (no status/statm/fd directories). NET_RX
//! softirqs come from the `softirq` line of the /proc/stat read already made, not from a
//! second file.

pub mod features;
pub mod glance;
mod pread;
pub mod processes;
pub mod reader;
pub mod snapshot;

pub use features::{
    idle_cpus, procfs_features, HOTSPOT_BUSY_SHARE, PROCFS_FEATURES, SOMETIMES_MISSING_FEATURE,
};
pub use glance::{Activity, ActivityRange, ActivityTolerance, Counters, GlanceReader};
pub use processes::{
    ProcessScanner, ProcessTick, IO_NEW_READS_PER_SCAN, IO_READS_PER_SCAN, MAX_OPEN_STAT_FILES,
};
pub use reader::{ProcReader, ReadCost, PROCESS_SCAN_MIN_INTERVAL_S, SYSTEM_FILES};
pub use snapshot::{
    CpuTicks, DiskFilter, DiskTotals, MemTotals, NetDevTotals, ProcSnapshot, ProcTexts,
    TcpUdpTotals,
};
