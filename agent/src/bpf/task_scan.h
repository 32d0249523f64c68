/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The record task_scan.bpf.c writes for every thread, read by
 * agent/src/perception/task_scan.rs (`TaskRecord`; keep both in sync: 2 u32, then 21 u64).
 * Without per-application fields (task_scan.bpf.c's with_apps = 0) only the first
 * BASE_RECORD_BYTES are written: 2 u32, then 10 u64.
 */
#ifndef ASA_TASK_SCAN_H
#define ASA_TASK_SCAN_H

struct task_scan_record {
	__u32 tgid;
	__u32 pid;
	/* this thread's own accounting */
	__u64 runtime_ns;	/* se.sum_exec_runtime */
	__u64 min_flt;
	__u64 io_bytes;		/* ioac.rchar + ioac.wchar */
	/* the process's, filled on the thread-group leader only (else 0) */
	__u64 exited_runtime_ns;	/* signal->sum_sched_runtime */
	__u64 exited_min_flt;		/* signal->min_flt */
	__u64 exited_io_bytes;		/* signal->ioac.rchar + wchar */
	__u64 threads;			/* signal->nr_threads */
	__u64 start_boottime_ns;
	__u64 rss_pages;		/* file + anon + shmem pages, as get_mm_rss() */
	__u64 leader;			/* 1 on the thread-group leader */
	/* the application the thread belongs to (perception/apps.rs) */
	__u64 pgid;			/* signal->pids[PIDTYPE_PGID]->numbers[0].nr */
	__u64 cgroup;			/* cgroups->dfl_cgrp->kn->id */
	/* this thread's behaviour */
	__u64 nvcsw;
	__u64 nivcsw;
	__u64 run_delay_ns;		/* sched_info.run_delay (0 without CONFIG_SCHED_INFO) */
	__u64 storage_bytes;		/* ioac.read_bytes + write_bytes */
	__u64 io_calls;			/* ioac.syscr + syscw */
	/* the process's exited threads' (leader only) */
	__u64 exited_nvcsw;		/* signal->nvcsw */
	__u64 exited_nivcsw;		/* signal->nivcsw */
	__u64 exited_storage_bytes;	/* signal->ioac.read_bytes + write_bytes */
	__u64 exited_io_calls;		/* signal->ioac.syscr + syscw */
};

/* The whole-machine part of a record: up to (not including) pgid. */
#define BASE_RECORD_BYTES __builtin_offsetof(struct task_scan_record, pgid)

#endif
