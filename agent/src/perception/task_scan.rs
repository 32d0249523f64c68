//! The per-process scan as one BPF task iterator (`src/bpf/task_scan.bpf.c`): one read of the
//! iterator gives every thread's accounting as fixed-size binary records, which
//! [`aggregate`] sums per process into the same [`ProcessStat`]s and I/O totals that
//! `/proc/<pid>/stat` and `/proc/<pid>/io` give.
//!
//! The same walk gives each thread's application and behaviour ([`TaskRecord::thread_sample`]),
//! which per-application perception ([`super::apps`]) groups; decoded only when asked for
//! ([`TaskScan::threads`]), so the whole-machine tick pays nothing for it.
//!
//! Why: the procfs scan costs a system call, the kernel's text formatting and a parse per
//! process (about 12 µs a process on the host, most of a tick); the iterator does the walk in
//! the kernel and the parse is a copy. It needs BTF, CAP_BPF + CAP_PERFMON (or root) and a
//! kernel with task iterators (5.8+); without them the sampler keeps the procfs scan.

use std::collections::HashMap;
use std::io::Read;
use std::mem::MaybeUninit;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, MapHandle};

use super::apps::{ExitedTotals, ThreadSample};
use super::procfs_source::processes::ProcessStat;

bpf_skeleton!("task_scan.skel.rs");

/// Size of `struct task_scan_record` (src/bpf/task_scan.h): two u32 and 21 u64.
pub const RECORD_BYTES: usize = 8 + 21 * 8;

/// Size of a record's whole-machine part (`BASE_RECORD_BYTES`): two u32 and ten u64, all a walk
/// writes while per-application fields are off ([`TaskScan::set_with_apps`]).
pub const BASE_RECORD_BYTES: usize = 8 + 10 * 8;

/// One thread's record, as the iterator writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskRecord {
    /// Thread-group id (the process).
    pub tgid: u32,
    /// Thread id.
    pub pid: u32,
    /// This thread's CPU time, ns.
    pub runtime_ns: u64,
    /// This thread's minor faults.
    pub min_flt: u64,
    /// This thread's rchar + wchar.
    pub io_bytes: u64,
    /// The process's exited threads' CPU time, ns (leader only).
    pub exited_runtime_ns: u64,
    /// The process's exited threads' minor faults (leader only).
    pub exited_min_flt: u64,
    /// The process's exited threads' rchar + wchar (leader only).
    pub exited_io_bytes: u64,
    /// Live threads of the process (leader only).
    pub threads: u64,
    /// The process's start, ns since boot (leader only).
    pub start_boottime_ns: u64,
    /// Resident pages (leader only).
    pub rss_pages: u64,
    /// Whether this is the thread-group leader.
    pub leader: bool,
    /// Process group id.
    pub pgid: u32,
    /// cgroup-v2 id (kernfs id: the inode of the cgroup's folder).
    pub cgroup: u64,
    /// This thread's voluntary context switches.
    pub nvcsw: u64,
    /// This thread's involuntary context switches.
    pub nivcsw: u64,
    /// This thread's time waiting on a run queue, ns (0 without CONFIG_SCHED_INFO).
    pub run_delay_ns: u64,
    /// This thread's read_bytes + write_bytes (block layer).
    pub storage_bytes: u64,
    /// This thread's read and write system calls (syscr + syscw).
    pub io_calls: u64,
    /// The process's exited threads' voluntary switches (leader only).
    pub exited_nvcsw: u64,
    /// The process's exited threads' involuntary switches (leader only).
    pub exited_nivcsw: u64,
    /// The process's exited threads' storage bytes (leader only).
    pub exited_storage_bytes: u64,
    /// The process's exited threads' read and write calls (leader only).
    pub exited_io_calls: u64,
}

impl TaskRecord {
    /// Decodes one record (native byte order), whole ([`RECORD_BYTES`]) or its whole-machine
    /// part ([`BASE_RECORD_BYTES`], the per-application fields 0); None for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != RECORD_BYTES && bytes.len() != BASE_RECORD_BYTES {
            return None;
        }
        let u32_at = |i: usize| u32::from_ne_bytes(bytes[i..i + 4].try_into().unwrap());
        let u64_at = |k: usize| {
            let i = 8 + 8 * k;
            u64::from_ne_bytes(bytes[i..i + 8].try_into().unwrap())
        };
        let app_u64_at = |k: usize| {
            if bytes.len() == RECORD_BYTES {
                u64_at(k)
            } else {
                0
            }
        };
        Some(TaskRecord {
            tgid: u32_at(0),
            pid: u32_at(4),
            runtime_ns: u64_at(0),
            min_flt: u64_at(1),
            io_bytes: u64_at(2),
            exited_runtime_ns: u64_at(3),
            exited_min_flt: u64_at(4),
            exited_io_bytes: u64_at(5),
            threads: u64_at(6),
            start_boottime_ns: u64_at(7),
            rss_pages: u64_at(8),
            leader: u64_at(9) != 0,
            pgid: app_u64_at(10) as u32,
            cgroup: app_u64_at(11),
            nvcsw: app_u64_at(12),
            nivcsw: app_u64_at(13),
            run_delay_ns: app_u64_at(14),
            storage_bytes: app_u64_at(15),
            io_calls: app_u64_at(16),
            exited_nvcsw: app_u64_at(17),
            exited_nivcsw: app_u64_at(18),
            exited_storage_bytes: app_u64_at(19),
            exited_io_calls: app_u64_at(20),
        })
    }

    /// The thread as per-application perception sees it ([`ThreadSample`]).
    pub fn thread_sample(&self) -> ThreadSample {
        ThreadSample {
            tgid: self.tgid,
            pid: self.pid,
            pgid: self.pgid,
            cgroup: self.cgroup,
            runtime_ns: self.runtime_ns,
            nvcsw: self.nvcsw,
            nivcsw: self.nivcsw,
            run_delay_ns: self.run_delay_ns,
            storage_bytes: self.storage_bytes,
            char_bytes: self.io_bytes,
            io_calls: self.io_calls,
            leader: self.leader,
            exited: ExitedTotals {
                runtime_ns: self.exited_runtime_ns,
                nvcsw: self.exited_nvcsw,
                nivcsw: self.exited_nivcsw,
                storage_bytes: self.exited_storage_bytes,
                char_bytes: self.exited_io_bytes,
                io_calls: self.exited_io_calls,
            },
        }
    }
}

/// A process's sums over its thread records.
#[derive(Default)]
struct Sums {
    runtime_ns: u64,
    min_flt: u64,
    io_bytes: u64,
    thread_records: u64,
    leader: Option<TaskRecord>,
}

/// Sums the thread records per process into `processes` (cleared first; in tgid order) and
/// each process's rchar + wchar into `io` (cleared first). CPU time is converted to clock ticks
/// of `ticks_per_second`, as /proc/<pid>/stat prints it; the start time stays in ns (it is only
/// a key). A process whose leader record is missing (it exited as the walk passed) counts its
/// thread records as its threads and has no resident set.
pub fn aggregate(
    records: impl IntoIterator<Item = TaskRecord>,
    ticks_per_second: u64,
    page_size: u64,
    processes: &mut Vec<ProcessStat>,
    io: &mut HashMap<i32, u64>,
) {
    let mut by_process: HashMap<u32, Sums> = HashMap::new();
    for r in records {
        let sums = by_process.entry(r.tgid).or_default();
        sums.runtime_ns += r.runtime_ns;
        sums.min_flt += r.min_flt;
        sums.io_bytes += r.io_bytes;
        sums.thread_records += 1;
        if r.leader {
            sums.runtime_ns += r.exited_runtime_ns;
            sums.min_flt += r.exited_min_flt;
            sums.io_bytes += r.exited_io_bytes;
            sums.leader = Some(r);
        }
    }
    let ns_per_tick = 1_000_000_000 / ticks_per_second.max(1);
    processes.clear();
    io.clear();
    for (tgid, sums) in by_process {
        let pid = tgid as i32;
        let leader = sums.leader.unwrap_or_default();
        processes.push(ProcessStat {
            pid,
            start: leader.start_boottime_ns,
            cpu_ticks: sums.runtime_ns / ns_per_tick,
            minflt: sums.min_flt,
            threads: if sums.leader.is_some() {
                leader.threads
            } else {
                sums.thread_records
            },
            rss_bytes: leader.rss_pages * page_size,
        });
        io.insert(pid, sums.io_bytes);
    }
    processes.sort_unstable_by_key(|p| p.pid);
}

/// The loaded task iterator. Each [`TaskScan::read`] walks every task once.
pub struct TaskScan {
    link: Link,
    /// The program's `.bss` (its one global, `with_apps`).
    globals: MapHandle,
    /// What the next walk writes: whole records (true) or their whole-machine part.
    with_apps: bool,
    /// The record size of the walk in `buffer`.
    buffer_record_bytes: usize,
    buffer: Vec<u8>,
    ticks_per_second: u64,
    page_size: u64,
}

impl TaskScan {
    /// Loads and attaches the iterator. Fails (with the reason) without BTF, BPF rights, task
    /// iterators, or a kernel field the program reads (CO-RE relocation).
    pub fn load() -> Result<Self> {
        if !std::path::Path::new(super::bpf::KERNEL_BTF).exists() {
            bail!(
                "{} is missing: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF)",
                super::bpf::KERNEL_BTF
            );
        }
        let mut storage = MaybeUninit::uninit();
        let open = skel::TaskScanSkelBuilder::default()
            .open(&mut storage)
            .context("open the task-scan BPF object")?;
        let skel = open
            .load()
            .context("load the task-scan BPF iterator (needs root or CAP_BPF + CAP_PERFMON)")?;
        let link = skel
            .progs
            .asa_task_scan
            .attach()
            .context("attach the task-scan iterator")?;
        let globals =
            MapHandle::try_from(&skel.maps.bss).context("hold the task-scan iterator's globals")?;
        Ok(TaskScan {
            link,
            globals,
            with_apps: false,
            buffer_record_bytes: BASE_RECORD_BYTES,
            buffer: Vec::with_capacity(64 * 1024),
            ticks_per_second: procfs::ticks_per_second(),
            page_size: procfs::page_size(),
        })
    }

    /// One walk over every task: each process's [`ProcessStat`] into `processes` and its
    /// rchar + wchar into `io` (both cleared first).
    pub fn read(
        &mut self,
        processes: &mut Vec<ProcessStat>,
        io: &mut HashMap<i32, u64>,
    ) -> Result<()> {
        let record_bytes = self.record_bytes();
        let mut iter = Iter::new(&self.link).context("start a task-scan walk")?;
        self.buffer.clear();
        self.buffer_record_bytes = record_bytes;
        iter.read_to_end(&mut self.buffer)
            .context("read the task-scan iterator")?;
        if !self.buffer.len().is_multiple_of(record_bytes) {
            bail!(
                "the task-scan iterator gave {} bytes, not a whole number of {record_bytes}-byte records",
                self.buffer.len()
            );
        }
        let records = self
            .buffer
            .chunks_exact(record_bytes)
            .filter_map(TaskRecord::from_bytes);
        aggregate(
            records,
            self.ticks_per_second,
            self.page_size,
            processes,
            io,
        );
        Ok(())
    }

    /// The record size walks write now.
    fn record_bytes(&self) -> usize {
        if self.with_apps {
            RECORD_BYTES
        } else {
            BASE_RECORD_BYTES
        }
    }

    /// Whether walks from the next [`TaskScan::read`] on also read each thread's application
    /// and behaviour (per-application perception). Off at load: a whole-machine walk reads
    /// and copies half as much per thread.
    pub fn set_with_apps(&mut self, on: bool) -> Result<()> {
        if on == self.with_apps {
            return Ok(());
        }
        let mut globals = vec![0u8; self.globals.value_size() as usize];
        globals[..4].copy_from_slice(&u32::from(on).to_ne_bytes());
        self.globals
            .update(&0u32.to_ne_bytes(), &globals, MapFlags::ANY)
            .context("set the task-scan iterator's with_apps")?;
        self.with_apps = on;
        Ok(())
    }

    /// The last walk's threads as [`ThreadSample`]s into `threads` (cleared first); false (and
    /// nothing) before the first [`TaskScan::read`] or when that walk was a whole-machine one
    /// ([`TaskScan::set_with_apps`]). Decodes the walk's buffer again: no second walk.
    pub fn threads(&self, threads: &mut Vec<ThreadSample>) -> bool {
        threads.clear();
        if self.buffer_record_bytes != RECORD_BYTES {
            return false;
        }
        threads.extend(
            self.buffer
                .chunks_exact(RECORD_BYTES)
                .filter_map(TaskRecord::from_bytes)
                .map(|r| r.thread_sample()),
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tgid: u32, pid: u32, runtime_ns: u64, min_flt: u64, io_bytes: u64) -> TaskRecord {
        TaskRecord {
            tgid,
            pid,
            runtime_ns,
            min_flt,
            io_bytes,
            ..TaskRecord::default()
        }
    }

    fn leader(r: TaskRecord, exited: (u64, u64, u64), threads: u64, rss_pages: u64) -> TaskRecord {
        TaskRecord {
            exited_runtime_ns: exited.0,
            exited_min_flt: exited.1,
            exited_io_bytes: exited.2,
            threads,
            start_boottime_ns: 777,
            rss_pages,
            leader: true,
            ..r
        }
    }

    #[test]
    fn records_decode_field_by_field_in_the_c_layout() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&7u32.to_ne_bytes());
        bytes.extend_from_slice(&9u32.to_ne_bytes());
        for v in 1..=21u64 {
            bytes.extend_from_slice(&v.to_ne_bytes());
        }
        let r = TaskRecord::from_bytes(&bytes).unwrap();
        assert_eq!((r.pgid, r.cgroup, r.nvcsw, r.nivcsw), (11, 12, 13, 14));
        assert_eq!((r.run_delay_ns, r.storage_bytes, r.io_calls), (15, 16, 17));
        assert_eq!(
            (
                r.exited_nvcsw,
                r.exited_nivcsw,
                r.exited_storage_bytes,
                r.exited_io_calls
            ),
            (18, 19, 20, 21)
        );
        assert_eq!((r.tgid, r.pid), (7, 9));
        assert_eq!(
            (r.runtime_ns, r.min_flt, r.io_bytes, r.exited_runtime_ns),
            (1, 2, 3, 4)
        );
        assert_eq!((r.exited_min_flt, r.exited_io_bytes, r.threads), (5, 6, 7));
        assert_eq!((r.start_boottime_ns, r.rss_pages, r.leader), (8, 9, true));
        assert_eq!(TaskRecord::from_bytes(&bytes[1..]), None);
    }

    /// A process is its live threads plus what its exited threads left in the leader's
    /// signal_struct, as /proc/<pid>/stat and /proc/<pid>/io count it.
    #[test]
    fn a_process_sums_its_threads_and_its_exited_threads() {
        let records = [
            leader(
                record(10, 10, 30_000_000, 5, 100),
                (20_000_000, 1, 11),
                3,
                50,
            ),
            record(10, 11, 40_000_000, 2, 1000),
            record(10, 12, 10_000_000, 0, 0),
            leader(record(20, 20, 5_000_000, 9, 7), (0, 0, 0), 1, 8),
        ];
        let (mut processes, mut io) = (Vec::new(), HashMap::new());
        aggregate(records, 100, 4096, &mut processes, &mut io);
        assert_eq!(
            processes,
            vec![
                ProcessStat {
                    pid: 10,
                    start: 777,
                    cpu_ticks: 10, // 100 ms at 100 ticks a second
                    minflt: 8,
                    threads: 3,
                    rss_bytes: 50 * 4096,
                },
                ProcessStat {
                    pid: 20,
                    start: 777,
                    cpu_ticks: 0, // 5 ms is under one tick
                    minflt: 9,
                    threads: 1,
                    rss_bytes: 8 * 4096,
                },
            ]
        );
        assert_eq!(io[&10], 1111);
        assert_eq!(io[&20], 7);
    }

    #[test]
    fn a_process_without_its_leader_record_counts_its_thread_records() {
        let records = [record(30, 31, 0, 1, 0), record(30, 32, 0, 1, 0)];
        let (mut processes, mut io) = (Vec::new(), HashMap::new());
        aggregate(records, 100, 4096, &mut processes, &mut io);
        assert_eq!(processes.len(), 1);
        assert_eq!((processes[0].threads, processes[0].rss_bytes), (2, 0));
    }

    #[test]
    fn a_record_becomes_its_threads_sample_with_the_leaders_exited_totals() {
        let r = TaskRecord {
            pgid: 40,
            cgroup: 9000,
            nvcsw: 3,
            nivcsw: 4,
            run_delay_ns: 5,
            storage_bytes: 6,
            io_calls: 7,
            exited_nvcsw: 13,
            exited_nivcsw: 14,
            exited_storage_bytes: 16,
            exited_io_calls: 17,
            ..leader(record(41, 41, 100, 0, 8), (200, 0, 18), 2, 0)
        };
        let t = r.thread_sample();
        assert_eq!(
            (t.tgid, t.pid, t.pgid, t.cgroup, t.leader),
            (41, 41, 40, 9000, true)
        );
        assert_eq!(
            (t.runtime_ns, t.nvcsw, t.nivcsw, t.run_delay_ns),
            (100, 3, 4, 5)
        );
        assert_eq!((t.storage_bytes, t.char_bytes, t.io_calls), (6, 8, 7));
        assert_eq!(
            t.exited,
            ExitedTotals {
                runtime_ns: 200,
                nvcsw: 13,
                nivcsw: 14,
                storage_bytes: 16,
                char_bytes: 18,
                io_calls: 17,
            }
        );
    }

    #[test]
    fn aggregating_again_starts_from_nothing() {
        let (mut processes, mut io) = (Vec::new(), HashMap::new());
        aggregate([record(1, 1, 0, 0, 0)], 100, 4096, &mut processes, &mut io);
        aggregate([record(2, 2, 0, 0, 0)], 100, 4096, &mut processes, &mut io);
        assert_eq!(processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [2]);
        assert!(!io.contains_key(&1));
    }
}
