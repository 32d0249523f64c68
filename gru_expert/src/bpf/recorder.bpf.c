/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gru_record: traces the kernel's default scheduler (no sched_ext needed) and
 * emits one struct gru_task_event per placement decision it makes:
 *   - sched_wakeup / sched_wakeup_new: the CPU chosen for a waking task;
 *   - sched_migrate_task: the CPU a task is moved to (load balancing).
 * switch_count is counted here on sched_switch, like scx_gru counts switch-ins
 * in ops.running(), so the features mean the same in both programs.
 */
/*
 * Plain tracing headers, not scx/common.bpf.h: that one carries an fentry
 * program on bpf_scx_reg, which cannot load on a kernel without sched_ext.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

u64 nr_events;
u64 nr_ringbuf_drops;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GRU_RINGBUF_BYTES);
} events SEC(".maps");

/* pid -> number of times the task was switched in. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GRU_MAX_PREDICTIONS);
	__type(key, u32);
	__type(value, u64);
} switch_counts SEC(".maps");

static void send_event(struct task_struct *p, s32 cpu, u32 source)
{
	struct gru_task_event *ev;
	u32 pid = p->pid;
	u64 *count;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&nr_ringbuf_drops, 1);
		return;
	}
	count = bpf_map_lookup_elem(&switch_counts, &pid);

	ev->stamp_ns = bpf_ktime_get_ns();
	ev->pid = pid;
	ev->cpu = cpu;
	ev->prio = p->prio;
	ev->nr_cpus_allowed = p->nr_cpus_allowed;
	ev->runtime_ns = p->se.sum_exec_runtime;
	ev->nvcsw = p->nvcsw;
	ev->nivcsw = p->nivcsw;
	ev->switch_count = count ? *count : 0;
	ev->flags = p->flags;
	ev->source = source;
	bpf_probe_read_kernel_str(ev->comm, sizeof(ev->comm), p->comm);

	bpf_ringbuf_submit(ev, 0);
	__sync_fetch_and_add(&nr_events, 1);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(gru_rec_wakeup, struct task_struct *p)
{
	send_event(p, BPF_CORE_READ(p, thread_info.cpu), GRU_SRC_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(gru_rec_wakeup_new, struct task_struct *p)
{
	send_event(p, BPF_CORE_READ(p, thread_info.cpu), GRU_SRC_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(gru_rec_migrate, struct task_struct *p, int dest_cpu)
{
	send_event(p, dest_cpu, GRU_SRC_MIGRATE);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(gru_rec_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u32 pid = next->pid;
	u64 one = 1, *count;

	if (!pid)
		return 0;
	count = bpf_map_lookup_elem(&switch_counts, &pid);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&switch_counts, &pid, &one, BPF_NOEXIST);
	return 0;
}
