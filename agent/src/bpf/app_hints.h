/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Layouts shared by app_hints.bpf.c and agent/src/action/app_hints.rs (keep both in sync).
 */
#ifndef ASA_APP_HINTS_H
#define ASA_APP_HINTS_H

/* An application: the processes sharing a cgroup (v2 id) and a process group. */
struct app_key {
	__u64 cgroup;
	__u32 pgid;
	__u32 pad;
};

/* scx_layered's task hint (its main.bpf.c `struct task_hint`): the value of its task-hint map,
 * which this program shares through the bpffs pin scx_layered gets as --task-hint-map. */
struct task_hint {
	__u64 hint;
	__u64 __reserved[3];
};

/* What one apply walk did (the iterator's whole output, written once at its end). */
struct apply_totals {
	__u64 tasks;	/* tasks walked */
	__u64 set;	/* hints written (new or changed) */
	__u64 cleared;	/* hints removed: the task's application has no class */
};

#endif
