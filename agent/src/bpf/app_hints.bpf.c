/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ASA action: each application's class into scx_layered's task hints.
 *
 * scx_layered (run with --task-hint-map PATH) puts a task whose hint maps to a layer
 * (`HintEquals`) into that layer, and re-checks a task's layer when its hint changes. The hint
 * lives in a task-storage map, one per task (thread). This object shares that map through its
 * bpffs pin, and fills it from the agent's table of application → hint (`app_hints`, keyed by
 * cgroup id and process group, as perception groups tasks):
 *   - asa_apply_hints, a task iterator: one walk gives every task its application's hint, and
 *     removes the hint of a task whose application has none (it then falls to the layers that
 *     match without hints);
 *   - asa_inherit_hint, on sched_process_fork: a new thread or process starts with its parent's
 *     hint, so a compiler that make forks is in make's layer from its first run, not from the
 *     next walk.
 * Nothing here blocks or waits; a failed storage allocation leaves the task without a hint.
 */
#include "perception_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "app_hints.h"

char _license[] SEC("license") = "GPL";

/* The current walk's totals, reported and reset at its end. */
struct apply_totals totals;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_hint);
} scx_layered_task_hint_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct app_key);
	__type(value, __u64);
} app_hints SEC(".maps");

static __always_inline void app_key_of(struct task_struct *task, struct app_key *key)
{
	struct signal_struct *sig = task->signal;
	struct css_set *cset = task->cgroups;
	struct pid *pgrp;

	key->cgroup = 0;
	key->pgid = 0;
	key->pad = 0;
	if (cset) {
		struct cgroup *cgrp = BPF_CORE_READ(cset, dfl_cgrp);

		if (cgrp)
			key->cgroup = BPF_CORE_READ(cgrp, kn, id);
	}
	if (sig) {
		pgrp = BPF_CORE_READ(sig, pids[ASA_PIDTYPE_PGID]);
		if (pgrp)
			key->pgid = BPF_CORE_READ(pgrp, numbers[0].nr);
	}
}

SEC("iter/task")
int asa_apply_hints(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_hint *stored;
	struct app_key key;
	__u64 *hint;

	if (!task) {
		/* The end of the walk: report it, and start the next one from zero. */
		bpf_seq_write(ctx->meta->seq, &totals, sizeof(totals));
		totals.tasks = 0;
		totals.set = 0;
		totals.cleared = 0;
		return 0;
	}
	totals.tasks++;
	app_key_of(task, &key);
	hint = bpf_map_lookup_elem(&app_hints, &key);
	if (hint) {
		stored = bpf_task_storage_get(&scx_layered_task_hint_map, task, NULL,
					      BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (stored && stored->hint != *hint) {
			stored->hint = *hint;
			totals.set++;
		}
	} else if (bpf_task_storage_get(&scx_layered_task_hint_map, task, NULL, 0)) {
		bpf_task_storage_delete(&scx_layered_task_hint_map, task);
		totals.cleared++;
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(asa_inherit_hint, struct task_struct *parent, struct task_struct *child)
{
	struct task_hint *from, *to;

	from = bpf_task_storage_get(&scx_layered_task_hint_map, parent, NULL, 0);
	if (!from)
		return 0;
	to = bpf_task_storage_get(&scx_layered_task_hint_map, child, NULL,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (to)
		to->hint = from->hint;
	return 0;
}
