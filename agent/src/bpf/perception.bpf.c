/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ASA perception: scheduler counters for the feature sampler.
 *
 * BTF tracepoints (tp_btf) on sched_switch, sched_wakeup, sched_wakeup_new and
 * sched_migrate_task. tp_btf attaches through the BPF link API with the BTF id
 * of the tracepoint: no tracefs mount is needed (classic tracepoints need it to
 * look up the event id).
 *
 * Everything is counted in one per-CPU array entry (no atomics, no contention);
 * user space sums the CPUs each tick and takes differences.
 *
 * Wait times: a task's enqueue time is stored (in its task local storage) when
 * it is woken (wakeup) or switched out while still runnable (preempted /
 * yielded); when it is switched in, the difference is its run-queue wait. Waits after a wakeup also go into a
 * log2 histogram (wakeup-to-run latency).
 */
#include "perception_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "perception.h"

char _license[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct perception_counters);
} counters SEC(".maps");

/* When a task became runnable (0: not waiting), in the task's own local storage: a lookup is a
 * pointer walk from the task, with no hashing, no LRU lists and no delete at switch-in (an LRU
 * hash keyed by pid cost 342 ns an event in all on the host's ping-pong). The storage goes
 * with the task when it exits. */
struct enqueue_mark {
	u64 at_ns;
	u32 after_wakeup;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct enqueue_mark);
} enqueued SEC(".maps");

static __always_inline struct perception_counters *this_cpu_counters(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* floor(log2(v)) for v > 0, 0 for v == 0; clamped to the last bucket. */
static __always_inline u32 log2_bucket(u64 v)
{
	u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	if (r >= PERCEPTION_LATENCY_BUCKETS)
		r = PERCEPTION_LATENCY_BUCKETS - 1;
	return r;
}

static __always_inline void mark_enqueued(struct task_struct *p, u32 after_wakeup)
{
	struct enqueue_mark *mark;

	if (p->pid == 0) /* the idle tasks (one per CPU) all have pid 0 */
		return;
	mark = bpf_task_storage_get(&enqueued, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!mark)
		return;
	mark->at_ns = bpf_ktime_get_ns();
	mark->after_wakeup = after_wakeup;
}

static __always_inline int on_wakeup(struct task_struct *p, int is_new)
{
	struct perception_counters *c = this_cpu_counters();

	if (!c)
		return 0;
	c->wakeups++;
	if (is_new)
		c->wakeups_new++;
	mark_enqueued(p, 1);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(asa_sched_wakeup, struct task_struct *p)
{
	return on_wakeup(p, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(asa_sched_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(asa_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct perception_counters *c = this_cpu_counters();
	struct enqueue_mark *mark;
	u32 prev_pid = prev->pid, next_pid = next->pid;

	if (!c)
		return 0;
	c->switches++;
	if (prev_pid != 0) {
		/* Like the kernel's nvcsw/nivcsw: a task that leaves the CPU still
		 * runnable (state TASK_RUNNING = 0) or preempted is involuntary. */
		if (preempt || prev_state == 0) {
			c->involuntary++;
			mark_enqueued(prev, 0);
		} else {
			c->voluntary++;
		}
	}
	if (next_pid == 0)
		return 0;
	mark = bpf_task_storage_get(&enqueued, next, 0, 0);
	if (!mark || !mark->at_ns)
		return 0;
	u64 now = bpf_ktime_get_ns();
	if (now > mark->at_ns) {
		u64 waited = now - mark->at_ns;

		c->runq_wait_ns += waited;
		c->runq_waits++;
		if (mark->after_wakeup) {
			c->wakeup_latency_count++;
			c->wakeup_latency_hist[log2_bucket(waited) & (PERCEPTION_LATENCY_BUCKETS - 1)]++;
		}
	}
	mark->at_ns = 0;
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(asa_sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	struct perception_counters *c = this_cpu_counters();

	if (c)
		c->migrations++;
	return 0;
}
