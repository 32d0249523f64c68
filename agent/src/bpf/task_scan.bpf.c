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
 * One read of the iterator's file is one scan.
 */
#include "perception_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "task_scan.h"

char _license[] SEC("license") = "GPL";

SEC("iter/task")
int asa_task_scan(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct task_scan_record r = {};
	struct signal_struct *sig;
	struct mm_struct *mm;

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
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
