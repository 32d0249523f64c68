/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ASA perception: the per-process scan as one BPF task iterator.
 *
 * Reading /proc/<pid>/stat of every process costs a system call, the kernel's
 * text formatting and a parse per process (12 us a process on the host, far
 * more in an emulated guest). This iterator walks every task once and writes
 * one fixed-size binary record per thread (task_scan.h): the thread's own CPU
 * time, minor faults and I/O, and on the thread-group leader the totals of the
 * process's exited threads, its thread count, start time and resident set.
 * User space sums the threads of each process, which gives what
 * /proc/<pid>/stat and /proc/<pid>/io print for the whole process.
 *
 * The same walk gives what per-application perception (perception/apps.rs) needs
 * of each thread: its application (process group and cgroup-v2 id), its context
 * switches, run-queue wait, storage I/O and read/write calls, and on the leader
 * the exited threads' totals of the same. That part is read only while user space sets
 * with_apps (per-application mode is on): otherwise the walk reads and writes what the
 * whole-machine features need, the first BASE_RECORD_BYTES of each record, and costs
 * what it did before per-application perception existed.
 *
 * One read of the iterator's file is one scan.
 */
#include "perception_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "task_scan.h"

char _license[] SEC("license") = "GPL";

/* Set by user space (TaskScan::set_with_apps) between walks: 1 = write whole records. */
__u32 with_apps = 0;

SEC("iter/task")
int asa_task_scan(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct task_scan_record r = {};
	struct signal_struct *sig;
	struct css_set *cset;
	struct mm_struct *mm;
	struct pid *pgrp;

	if (!task)
		return 0;
	r.tgid = task->tgid;
	r.pid = task->pid;
	r.runtime_ns = task->se.sum_exec_runtime;
	r.min_flt = task->min_flt;
	r.io_bytes = task->ioac.rchar + task->ioac.wchar;
	if (task->pid == task->tgid) {
		r.leader = 1;
		sig = task->signal;
		if (sig) {
			r.exited_runtime_ns = sig->sum_sched_runtime;
			r.exited_min_flt = sig->min_flt;
			r.exited_io_bytes = sig->ioac.rchar + sig->ioac.wchar;
			r.threads = sig->nr_threads;
		}
		r.start_boottime_ns = task->start_boottime;
		mm = task->mm;
		if (mm) {
			__s64 pages = mm->rss_stat[0].count + mm->rss_stat[1].count +
				      mm->rss_stat[3].count;

			r.rss_pages = pages > 0 ? pages : 0;
		}
	}
	if (!with_apps) {
		bpf_seq_write(seq, &r, BASE_RECORD_BYTES);
		return 0;
	}
	r.nvcsw = task->nvcsw;
	r.nivcsw = task->nivcsw;
	r.io_calls = task->ioac.syscr + task->ioac.syscw;
	if (bpf_core_field_exists(task->ioac.read_bytes))
		r.storage_bytes = task->ioac.read_bytes + task->ioac.write_bytes;
	if (bpf_core_field_exists(task->sched_info))
		r.run_delay_ns = task->sched_info.run_delay;
	/* The application: as app_hints.bpf.c's app_key_of keys it. */
	cset = task->cgroups;
	if (cset) {
		struct cgroup *cgrp = BPF_CORE_READ(cset, dfl_cgrp);

		if (cgrp)
			r.cgroup = BPF_CORE_READ(cgrp, kn, id);
	}
	sig = task->signal;
	if (sig) {
		pgrp = BPF_CORE_READ(sig, pids[ASA_PIDTYPE_PGID]);
		if (pgrp)
			r.pgid = BPF_CORE_READ(pgrp, numbers[0].nr);
	}
	if (r.leader && sig) {
		r.exited_nvcsw = sig->nvcsw;
		r.exited_nivcsw = sig->nivcsw;
		r.exited_io_calls = sig->ioac.syscr + sig->ioac.syscw;
		if (bpf_core_field_exists(sig->ioac.read_bytes))
			r.exited_storage_bytes = sig->ioac.read_bytes + sig->ioac.write_bytes;
	}
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
