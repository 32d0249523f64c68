/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types perception.bpf.c needs, instead of a full vmlinux.h.
 *
 * Why: a vmlinux.h dumped from the build host's kernel ties the build to that
 * host (and is 3+ MB of generated text); a copy shipped by a crate ties it to
 * that crate. The program only reads task_struct::pid, so it declares that one
 * field with preserve_access_index: clang emits a CO-RE relocation and libbpf
 * resolves the real offset from the running kernel's BTF at load time. The
 * build is therefore offline, reproducible and kernel-independent; the kernel
 * needs BTF (CONFIG_DEBUG_INFO_BTF) at run time, as tp_btf programs do anyway.
 *
 * Constants below are the kernel's stable UAPI values (include/uapi/linux/bpf.h).
 */
#ifndef ASA_PERCEPTION_TYPES_H
#define ASA_PERCEPTION_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u32 u32;
typedef __u64 u64;
typedef _Bool bool;
#define true 1
#define false 0

/* enum bpf_map_type (UAPI) */
enum {
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

/* map_flags (UAPI) */
enum {
	BPF_F_NO_PREALLOC = 1,
};

/* bpf_task_storage_get() flags (UAPI) */
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

/* map update flags (UAPI) */
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

/*
 * Only the fields the programs read; offsets relocated by CO-RE at load time.
 * task_scan.bpf.c reads the per-process accounting that /proc/<pid>/stat and
 * /proc/<pid>/io print: a process's CPU time, minor faults and I/O are the
 * exited threads' totals in signal_struct plus each live thread's own.
 */
struct sched_entity {
	__u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct task_io_accounting {
	__u64 rchar;
	__u64 wchar;
	__u64 syscr;
	__u64 syscw;
	/* CONFIG_TASK_IO_ACCOUNTING: bytes that reached the block layer */
	__u64 read_bytes;
	__u64 write_bytes;
} __attribute__((preserve_access_index));

/* CONFIG_SCHED_INFO: time spent waiting on a run queue, ns. */
struct sched_info {
	unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct percpu_counter {
	__s64 count;
} __attribute__((preserve_access_index));

/* enum mm_counter_type: MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES */
struct mm_struct {
	struct percpu_counter rss_stat[4];
} __attribute__((preserve_access_index));

/* The process group's struct pid: numbers[0].nr is the id in the initial namespace. */
struct upid {
	int nr;
} __attribute__((preserve_access_index));

struct pid {
	struct upid numbers[1];
} __attribute__((preserve_access_index));

/* enum pid_type: PIDTYPE_PID, PIDTYPE_TGID, PIDTYPE_PGID, PIDTYPE_SID */
#define ASA_PIDTYPE_PGID 2

/* A task's cgroup-v2 id: task->cgroups->dfl_cgrp->kn->id. */
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct signal_struct {
	struct pid *pids[4];
	int nr_threads;
	unsigned long nvcsw;
	unsigned long nivcsw;
	__u64 sum_sched_runtime;
	unsigned long min_flt;
	struct task_io_accounting ioac;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	unsigned long min_flt;
	unsigned long nvcsw;
	unsigned long nivcsw;
	__u64 start_boottime;
	struct sched_entity se;
	struct sched_info sched_info;
	struct task_io_accounting ioac;
	struct signal_struct *signal;
	struct mm_struct *mm;
	struct task_struct *group_leader;
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

#endif
