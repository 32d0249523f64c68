/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gru: types and constants shared by the BPF programs (scheduler and
 * recorder) and the Rust side (through bindgen). A change to struct
 * gru_task_event changes the event ABI: bump GRU_EVENT_ABI_VERSION.
 */
#ifndef __GRU_INTF_H
#define __GRU_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed int s32;
typedef signed long long s64;
#endif /* __VMLINUX_H__ */

enum gru_consts {
	/* Version of struct gru_task_event; checked by user space at load. */
	GRU_EVENT_ABI_VERSION	= 1,
	/*
	 * Number of per-task model features carried by an event (thesis table
	 * 3.3); the model adds one placed-CPU column per CPU, from `cpu`.
	 */
	GRU_NR_TASK_FEATURES	= 7,
	/* Shared, vtime-ordered fallback dispatch queue. */
	GRU_FALLBACK_DSQ	= 0,
	/* The wake queue of CPU n (vtime-ordered, see wake_queues) is DSQ n + this. */
	GRU_WAKE_DSQ_BASE	= 1,
	/* Capacity of the pid_to_cpu map (LRU: old entries are evicted). */
	GRU_MAX_PREDICTIONS	= 65536,
	/* Ring buffer size in bytes (a power of two, multiple of the page size). */
	GRU_RINGBUF_BYTES	= 1 << 20,
	/* Most CPUs scx_gru keeps a per-CPU record for (a bigger id: no wakeup preemption). */
	GRU_MAX_CPUS		= 1024,
	/* PF_KTHREAD from include/linux/sched.h. */
	GRU_PF_KTHREAD		= 0x00200000,
};

/* Where an event was produced (field `source`). */
enum gru_event_source {
	/* scx_gru: ops.select_cpu() placed the task directly (enqueue is skipped). */
	GRU_SRC_SELECT_CPU	= 1,
	/* scx_gru: ops.enqueue(). */
	GRU_SRC_ENQUEUE		= 2,
	/* recorder: sched_wakeup / sched_wakeup_new under the default scheduler. */
	GRU_SRC_WAKEUP		= 3,
	/* recorder: sched_migrate_task (the default scheduler moved the task). */
	GRU_SRC_MIGRATE		= 4,
};

/*
 * One task event. The seven task features are, in this order
 * (see TASK_FEATURES in src/features.rs, which must match):
 *   0 prio, 1 nr_cpus_allowed, 2 runtime_ns, 3 nvcsw, 4 nivcsw,
 *   5 flags (PF_KTHREAD bit), 6 switch_count.
 * `cpu` is the CPU the task was placed on at the time of the event (the
 * label when recording under the default scheduler; scx_gru: the CPU it
 * placed the task on, or the task's previous CPU when it went to the shared
 * queue); the model sees it as the placed_cpu_K columns.
 */
struct gru_task_event {
	u64 stamp_ns;		/* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	u32 pid;
	s32 cpu;
	s32 prio;
	u32 nr_cpus_allowed;
	u64 runtime_ns;		/* se.sum_exec_runtime */
	u64 nvcsw;
	u64 nivcsw;
	u64 switch_count;	/* switch-ins counted by the program itself */
	u32 flags;		/* task_struct->flags */
	u32 source;		/* enum gru_event_source */
	char comm[16];
};

/* Value of the pid_to_cpu map, written by user space after inference. */
struct gru_prediction {
	u64 stamp_ns;		/* CLOCK_MONOTONIC time of the prediction */
	s32 cpu;		/* predicted CPU */
	u32 model_seq;		/* which inference produced it (for tracing) */
};

#endif /* __GRU_INTF_H */
