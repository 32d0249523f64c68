/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gru: GRU_sched as a sched_ext scheduler.
 *
 * Placement follows a CPU predicted by a GRU in user space (map pid_to_cpu)
 * when the prediction is fresh, allowed by the task's cpumask and the CPU can
 * take the task now; every other case falls back to a default policy: the
 * kernel's idle-CPU selection, a wake queue per CPU for wake-ups and one
 * shared DSQ for the rest, all ordered by deadline (a waking task whose
 * deadline is clearly before that of the task running on its previous CPU
 * preempts it when no CPU is idle).
 *
 * Placements send the task's features (struct gru_task_event) through a ring
 * buffer, except where an event cannot change a placement: a task with a
 * prediction young enough, a task that sent one within the last event gap, a
 * single-CPU task and scx_gru's own threads. A full ring buffer drops the event
 * and counts the drop. While user space pauses the model (model_paused),
 * placements neither look up predictions nor send events.
 *
 * With bpf_model (--bpf-model, issue 42) select_cpu decides itself: the MLP of
 * mlp.bpf.h on the waking task's state, from the active slot of bpf_models,
 * with no user-space step and no event; a CPU it picks is followed when idle;
 * without a valid model (gru_mlp_active()) the default policy places the task.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "mlp_intf.h"
#include "mlp.bpf.h"

char _license[] SEC("license") = "GPL";

/* Time slice given to every task (ns); the longest one with slice_min_ns. */
const volatile u64 slice_ns = 5ULL * 1000 * 1000;
/*
 * Optional (0: off): the slice shrinks with the number of tasks waiting in the
 * shared DSQ, slice_ns / (waiting + 1), down to this (ns), so a waking task
 * waits less for a CPU under overload (as scx_bpfland does) without
 * preempting anyone.
 */
const volatile u64 slice_min_ns = 0;
/* A prediction older than this (ns) is ignored. */
const volatile u64 prediction_ttl_ns = 100ULL * 1000 * 1000;
/* Thread group of scx_gru itself: its threads are never queued behind the load. */
const volatile u32 usersched_tgid;
/*
 * A model is loaded: look up its predictions and send task events to user
 * space (false: the no-model policy, no lookup, no event).
 */
const volatile bool send_events = true;
/*
 * Follow fresh predictions (--observe-only turns it off: the model runs and
 * its predictions are looked up as usual, but every placement is the
 * fallback's, counted in nr_pred_ignored; what following them changes).
 */
const volatile bool apply_predictions = true;
/*
 * scx_gru's own threads (the ring-buffer poller, which runs the model) go to
 * their CPU's local DSQ when they wake up: predictions that wait behind the
 * load go stale. usersched_always_first keeps them first after a slice too.
 * Off (the default since 2026-11-26), a run that outlasts its slice (a model
 * run over a batch: ~30 ms of an emulated vCPU for 64 tasks in the lab) goes
 * to the shared DSQ by its vtime like any task, instead of holding the CPU
 * until it is done.
 */
const volatile bool usersched_always_first = false;
/* Wake the ring-buffer poller when this many bytes are waiting ... */
const volatile u64 wakeup_batch_bytes = 64 * sizeof(struct gru_task_event);
/* ... or when the oldest waiting event is this old (ns). */
const volatile u64 wakeup_max_delay_ns = 100ULL * 1000 * 1000;
/* At most one event per task within this gap (ns). */
const volatile u64 event_gap_ns = 10ULL * 1000 * 1000;
/* No event for a task whose prediction is younger than this (ns). */
const volatile u64 event_refresh_ns = 250ULL * 1000 * 1000;
/*
 * Wakeup preemption (on by default, --no-wakeup-preempt turns it off): a
 * waking task that finds no idle CPU preempts the
 * task running on its previous CPU when its deadline is before that task's by
 * more than preempt_margin_ns, as EEVDF's wakeup preemption does, instead of
 * waiting in a queue for a slice to end. With burst_deadline a
 * deadline is vtime + the vtime used since the last wake-up (the running
 * task) or in the burst before the last sleep (the wakee), capped at
 * burst_cap_ns: a task that sleeps after short bursts preempts one that runs
 * without sleeping, not the other way round. The first version compared vtime
 * with the global vtime (any task owed time preempted): the mixed load's I/O
 * part 0.78 -> 1.10 x EEVDF, but its CPU part 1.42 -> 0.77 and hackbench
 * 1.39 -> 0.39, as nearly every wake-up preempted.
 */
const volatile bool wakeup_preempt = true;
/*
 * Deferred wakeup preemption (ns, 0: off; --deferred-preempt-us): a queued
 * wake-up whose deadline is clearly before that of a CPU hog (a task that
 * has not slept for burst_cap_ns) running on its previous CPU,
 * which has not yet run preempt_min_run_ns, arms that CPU's timer to preempt
 * the hog once it has run this long (at least preempt_min_run_ns), instead of
 * waiting for the end of its slice. Without it an I/O thread woken 100 us
 * after it slept found the hog that took its CPU short of the minimum and
 * waited its whole slice (the mixed load's I/O part 0.64x EEVDF, lab runs
 * 68-71). At the minimum itself (250 us) and for any running task it doubled
 * that I/O part, but the CPU part fell to 0.64x and hackbench to 0.80x
 * (run 72); for hogs only, after 1 ms: 0.91x / 1.22x, hackbench 0.90x
 * against 1.13x / 0.45x and 0.97x without (run 73). Off by default.
 */
const volatile u64 deferred_preempt_ns = 0;
/* How far (vtime ns) a wakee's deadline must be before the running task's. */
const volatile u64 preempt_margin_ns = 2500ULL * 1000;
/*
 * A running task keeps its CPU this long (ns) before a wake-up may preempt it
 * (EEVDF's run to parity): tasks that wake each other after bursts shorter
 * than this (hackbench's) do not cut each other's bursts. 2 ms since
 * 2026-11-26 (250 us before: hackbench 0.67x EEVDF once the lab stopped
 * starving a vCPU, 1.05-1.07x with 2 ms). Under a queue the shrunken slice
 * (under 2 ms) ends before it; beside a lone hog (5 ms slice) per-CPU
 * kthreads still preempt it.
 */
const volatile u64 preempt_min_run_ns = 2000ULL * 1000;
/*
 * Wakeup preemption for tasks that can run on one CPU only (per-CPU kernel
 * threads: kworkers, ksoftirqd): they go to their CPU's local DSQ, and a
 * waking one preempts the task running there by the same deadline rule
 * (vtime + burst, min run, margin) instead of waiting out its slice. Without
 * it a kworker woke behind a CPU hog's 5 ms slice (lab: 3.8 ms mean wait on a
 * one-thread CPU load, 10x EEVDF's).
 */
const volatile bool pinned_preempt = true;
/*
 * Kernel-thread wakeup preemption (ns of the hog's run, 0: off, the default;
 * --kthread-preempt-us): a waking kernel thread whose
 * deadline is clearly before that of a CPU hog (a task that has not slept for
 * burst_cap_ns) running on its CPU preempts the hog once the hog has run this
 * long, instead of preempt_min_run_ns: at once if it has, else by the CPU's
 * preemption timer. Tasks of the load wait on kernel threads: on the mixed
 * load the sysbench I/O threads' fsync() waits for the ext4 journal thread
 * (jbd2), whose mean wait for a CPU under scx_gru was 105-2973 us from round
 * to round (EEVDF: 525-605 us), and the I/O part followed it from 1.18 to
 * 0.86 x EEVDF (lab run 97); with 1 ms it waited 94-212 us in every round
 * of runs 98-100, cpu1, io8 and hackbench unchanged (run 100), but over the
 * 10 rounds of run 101 three rounds still fell to 0.45-0.74 x EEVDF's I/O
 * part (a state the journal's wait does not explain), and the mixed load's
 * paired means moved no closer to EEVDF: off. (The minimum run is there for
 * tasks that wake each other after short bursts, hackbench's, not for a hog
 * beside a kernel thread.)
 */
const volatile u64 kthread_preempt_ns = 0;
/*
 * Order the shared DSQ and the wake queues by a deadline, vtime + the vtime
 * the task has used since it last woke up (capped at burst_cap_ns), instead
 * of by vtime alone: a task that sleeps after short bursts (an I/O thread)
 * goes ahead of tasks that run without sleeping and have the same vtime
 * (EEVDF's deadline is vruntime + request; scx_bpfland's vruntime + awake
 * vtime). Off with --burst-cap-ms 0: vtime alone. The cap is the slice
 * (5 ms), the window task_vtime() keeps every vtime in: a larger cap (40 ms
 * until run 87) puts every task that has not slept for the window behind
 * every task that just woke, whatever either has run (the mixed load's CPU
 * hogs got 16-17 % of the CPUs against 52-53 % under EEVDF, run 84).
 */
const volatile bool burst_deadline = true;
const volatile u64 burst_cap_ns = 5ULL * 1000 * 1000;
/*
 * Dispatch affinity (0, the default: off; --dispatch-affinity-us): a CPU
 * dispatching from the shared DSQ takes the first of its first DISPATCH_SCAN
 * tasks that last ran on it, if its deadline is within this (vtime ns) of the
 * head's, instead of the head itself: fewer migrations (each one locks the
 * task's old run queue, and costs its caches) for a delay of the head bounded
 * by the window; the head goes to the next CPU that dispatches. The scan is
 * one DSQ lookup more per dispatch: 3 % of io8 in the lab, which models no
 * caches.
 */
const volatile u64 dispatch_affinity_ns = 0;
#define DISPATCH_SCAN 4
/*
 * Wake queues (on by default, --no-wake-queues turns them off): a wake-up
 * that finds no idle CPU waits in its CPU's own vtime-ordered DSQ (its wake
 * queue) instead of the shared one. The CPU takes the earlier deadline of its
 * wake queue's head and the shared DSQ's; a CPU with neither takes work from
 * another CPU's wake queue. A woken task thus runs where it was queued,
 * without the move of a task from another CPU's run queue (locks on both run
 * queues), unless a CPU would idle otherwise: io8 in the lab migrated 1 797
 * times a second with one shared DSQ, 454 with wake queues, 4 under EEVDF.
 * Tasks out of slice or preempted still go to the shared DSQ, so CPU-bound
 * tasks still balance across CPUs.
 */
const volatile bool wake_queues = true;
#define WAKE_DSQ(cpu) (GRU_WAKE_DSQ_BASE + (u64)(cpu))
/*
 * Wake-queue balance (0, the default: off; --wake-balance N): a wake-up whose
 * CPU's wake queue holds at least N tasks more than another CPU's (one other
 * CPU the task may use, drawn at random: two choices) waits in that CPU's
 * wake queue instead, if a CPU hog runs there (see wake_queue_cpu()). It kept
 * the mixed load's split alike from round to round in runs 90-92 but not over
 * the 10 rounds of run 96 (two states; I/O part 0.75 x EEVDF), so it is off.
 * Without it a wake-up waits where it last ran, and another CPU takes it only
 * when it has nothing else to run: beside CPU hogs the I/O threads of the
 * mixed load stayed on the CPU they started on (85-89 % of their runs on
 * CPU 0, run 84), where EEVDF's load balancer spreads them.
 */
const volatile u32 wake_balance = 0;
/*
 * Queue waits (runnable -> running) are counted by the task's burst: short
 * when both the burst before it last slept and the one in progress are under
 * this (vtime ns; an I/O thread), long otherwise (a task that runs without
 * sleeping). The wait is the kernel's own count (p->sched_info.run_delay,
 * which /proc/PID/schedstat shows), read when the run ends: timing it here
 * took a clock read in every ops.runnable().
 */
#define SHORT_BURST_NS (1000ULL * 1000)
/* Size of struct gru_task_event as compiled here; user space checks it. */
/*
 * The in-BPF model decides in select_cpu (--bpf-model; send_events is then
 * false: no GRU, no prediction, no event). See select_cpu_bpf_model().
 */
const volatile bool bpf_model = false;
const volatile u32 event_size = sizeof(struct gru_task_event);
const volatile u32 event_abi_version = GRU_EVENT_ABI_VERSION;

UEI_DEFINE(uei);

/* Global virtual time: the vtime of the most recently started task. */
static u64 vtime_now;
/* When the oldest event still waiting in the ring buffer was written. */
static u64 pending_since_ns;
/*
 * The consumer position when the poller was last woken (U64 max: never): until
 * it moves, the poller has not consumed since and needs no other wake-up.
 */
static u64 woken_at_cons_pos = (u64)-1;

/*
 * How many tasks are in the shared DSQ and in the wake queues, counted from
 * the insert until the task runs (see task_ctx.queued_in): never below the
 * truth, so a zero lets ops.dispatch() skip a queue without asking the kernel
 * (every DSQ kfunc looks the DSQ's id up in a hash table); a task that leaves
 * a queue without running is counted until it runs again. (In bss: user
 * space shows them as the queues' lengths.)
 */
u64 nr_hint_shared;
u64 nr_hint_wake;
/* nr_hint_wake per CPU's wake queue (kept with wake_balance only). */
u64 nr_hint_wake_cpu[GRU_MAX_CPUS];

/* Counters read by user space (bss). */
u64 nr_events;			/* events written to the ring buffer */
u64 nr_ringbuf_drops;		/* events lost: ring buffer full */
u64 nr_events_fresh;		/* events not sent: the task's prediction is young enough */
u64 nr_events_gap;		/* events not sent: the task sent one within the event gap */
u64 nr_ringbuf_wakeups;		/* submits that woke the poller */
u64 nr_pred_applied;		/* placed on the predicted CPU */
u64 nr_pred_applied_select;	/*   ... of which in select_cpu */
u64 nr_pred_moved;		/*   ... of which off the task's previous CPU */
/* Placements that fell back to the default policy, by reason (each placement counted once): */
u64 nr_pred_missing;		/* no prediction for the pid */
u64 nr_pred_stale;		/* prediction older than the TTL */
u64 nr_pred_disallowed;		/* predicted CPU not allowed by the cpumask / out of range */
u64 nr_pred_busy;		/* predicted CPU not idle */
u64 nr_pred_prev_idle;		/* another CPU predicted, the idle previous CPU kept */
u64 nr_pred_ignored;		/* a usable prediction not followed (--observe-only) */
u64 nr_pred_paused;		/* the model paused (follow gate): no lookup, no event */
/* Where fallback placements went: */
u64 nr_direct_idle;		/* an idle CPU's local DSQ, from select_cpu */
u64 nr_shared_enqueued;		/* a deadline-ordered DSQ (shared or wake queue), from enqueue */
u64 nr_pinned_local;		/* single-CPU tasks put on their CPU's local DSQ */
u64 nr_usersched_local;		/* scx_gru's own threads put on their CPU's local DSQ */
u64 nr_usersched_queued;	/* ... and out of slice, queued in the shared DSQ */
u64 nr_wakeup_preempts;		/* queued wake-ups that preempted their previous CPU */
u64 nr_pinned_preempts;		/* wake-ups of single-CPU tasks that preempted their CPU */
u64 nr_deferred_preempts;	/* queued wake-ups that armed their CPU's preemption timer */
u64 nr_timer_preempts;		/* preemption timers that found the same task running: preempted */
u64 nr_kthread_preempts;	/* kernel-thread wake-ups that preempted a hog or armed the timer to */
u64 nr_slices_shortened;	/* placements given less than slice_ns (slice_min_ns) */
u64 nr_select_no_idle;		/* wake-ups select_cpu left to enqueue at once: no CPU idle */
u64 nr_dispatch_affine;		/* shared-DSQ tasks taken by their last CPU ahead of the head */
u64 nr_prev_kept;		/* dispatches that found nothing and gave the running task a new slice */
u64 nr_wake_queued;		/* wake-ups queued in their CPU's wake queue (wake_queues) */
u64 nr_wake_stolen;		/*   ... of which taken by another CPU that had nothing else */
u64 nr_wake_balanced;		/*   ... of which queued on another CPU's (wake_balance) */
u64 nr_burst_keyed;		/* queue inserts keyed behind their vtime (burst_deadline) */
/* Queue waits (runnable -> running), see SHORT_BURST_NS: how many, and their total (ns). */
u64 nr_waits_short;
u64 wait_ns_short;
u64 nr_waits_long;
u64 wait_ns_long;
/* The in-BPF model (bpf_model), in select_cpu: */
u64 nr_bpf_model_decisions;	/* wake-ups the model chose a CPU for */
u64 nr_bpf_model_applied;	/*   ... placed on that CPU (idle, allowed) */
u64 nr_bpf_model_moved;		/*   ... of which off the task's previous CPU */
u64 nr_bpf_model_busy;		/*   ... not followed: the CPU busy, not allowed or absent */
u64 nr_bpf_model_invalid;	/* wake-ups with no valid model: the default policy */
u64 nr_bpf_model_by_cpu[GRU_MLP_MAX_CPUS];	/* decisions by the CPU chosen */
u64 bpf_model_seq_used;		/* model_seq of the model of the last decision */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GRU_RINGBUF_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GRU_MAX_PREDICTIONS);
	__type(key, u32);
	__type(value, struct gru_prediction);
} pid_to_cpu SEC(".maps");

/*
 * Written by user space: non-zero while its follow gate pauses inference, as
 * redundant (the predictions it followed kept tasks where the fallback keeps
 * them) or, unless --busy-pause-keeps-events, because the CPUs are busy (they
 * could not be followed). Placements then take the no-model path: no prediction
 * lookup (stale ones cost a hash lookup and a clock read for nothing) and no
 * event (it would only feed windows nobody reads; stale predictions made every
 * placement look up the task's storage and the clock too: lab run 50, 2.7x
 * the events and a slower io than with inference running). The probe or early
 * resume that ends the pause clears it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} model_paused SEC(".maps");

/*
 * The in-BPF model (bpf_model): two slots written by user space (mlp::ModelSlots)
 * and which one decides (0: none yet, else slot + 1); a replacement goes into
 * the slot not in use before the active one is switched, so a decision never
 * reads a half-written model.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MLP_SLOTS);
	__type(key, u32);
	__type(value, struct gru_mlp_model);
} bpf_models SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} bpf_model_active SEC(".maps");

/* One decision's input, features and logits (per CPU: off the BPF stack). */
struct bpf_model_scratch {
	struct gru_mlp_raw raw;
	struct gru_mlp_vec x;
	struct gru_mlp_logits logits;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct bpf_model_scratch);
} bpf_model_scratch SEC(".maps");

/* Per-task state kept by the program. */
struct task_ctx {
	u64 switch_count;
	u64 run_start_ns;	/* when the task last started running */
	u64 last_event_ns;	/* when the last event for the task was written */
	u64 awake_vtime;	/* vtime used since the task last woke up */
	u64 last_burst;		/* awake_vtime when it last went to sleep */
	u64 run_delay;		/* p->sched_info.run_delay when last counted */
	/*
	 * The task's virtual time. p->scx.dsq_vtime is only the key of its
	 * last vtime-ordered insert (a deadline): keeping the vtime here spares
	 * the two scx_bpf_task_set_dsq_vtime() calls per slice that undoing
	 * the deadline and charging the slice took.
	 */
	u64 vtime;
	u32 queued_in;		/* enum queued_in: which of the hints counts it */
	u32 wake_cpu;		/* whose wake queue, when queued_in is QUEUED_WAKE */
};

/* Where a task waiting in a DSQ of scx_gru's is counted (nr_hint_*). */
enum queued_in {
	QUEUED_NONE,
	QUEUED_SHARED,
	QUEUED_WAKE,
};

/*
 * The task running on each CPU: its vtime when it started and when, so that a
 * wake-up can tell how far ahead of it the running task is now.
 */
struct cpu_run {
	u64 vtime;		/* the task's dsq_vtime when it started running */
	u64 started_ns;		/* bpf_ktime_get_ns() when it started */
	u64 weight;		/* its weight (0: nothing recorded, the CPU is idle) */
	u64 awake_vtime;	/* its vtime used since its last wake-up, when it started */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_run);
} cpu_runs SEC(".maps");

/* Per CPU: the timer of a deferred wakeup preemption (see deferred_preempt_ns). */
struct preempt_timer {
	struct bpf_timer timer;
	u64 started_ns;		/* cpu_runs' started_ns of the run it was armed for */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MAX_CPUS);
	__type(key, u32);
	__type(value, struct preempt_timer);
} preempt_timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx_stor SEC(".maps");

static __always_inline void stat_inc(u64 *counter)
{
	__sync_fetch_and_add(counter, 1);
}

static __always_inline bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

/* Whether user space paused the model (see model_paused). */
static __always_inline bool is_model_paused(void)
{
	u32 zero = 0;
	u32 *paused = bpf_map_lookup_elem(&model_paused, &zero);

	return paused && *paused;
}

/*
 * @cpu's count in nr_hint_wake_cpu, NULL if out of range (a bounds check the
 * verifier sees: the compiler drops a plain one it can prove from a modulo).
 */
static __always_inline u64 *wake_count(u32 cpu)
{
	return MEMBER_VPTR(nr_hint_wake_cpu, [cpu]);
}

/* Add @delta to the count of @cpu's wake queue (wake_balance only). */
static __always_inline void hint_wake_cpu(u32 cpu, s64 delta)
{
	u64 *count;

	if (!wake_balance)
		return;
	count = wake_count(cpu);
	if (count)
		__sync_fetch_and_add(count, delta);
}

/*
 * Count @tctx's task as waiting in @where (QUEUED_NONE: no longer waiting),
 * in @cpu's wake queue for QUEUED_WAKE.
 */
static void hint_queued(struct task_ctx *tctx, u32 where, u32 cpu)
{
	u32 was = tctx->queued_in;

	if (was == where && (where != QUEUED_WAKE || tctx->wake_cpu == cpu))
		return;
	if (was == QUEUED_SHARED) {
		__sync_fetch_and_sub(&nr_hint_shared, 1);
	} else if (was == QUEUED_WAKE) {
		__sync_fetch_and_sub(&nr_hint_wake, 1);
		hint_wake_cpu(tctx->wake_cpu, -1);
	}
	if (where == QUEUED_SHARED) {
		__sync_fetch_and_add(&nr_hint_shared, 1);
	} else if (where == QUEUED_WAKE) {
		__sync_fetch_and_add(&nr_hint_wake, 1);
		hint_wake_cpu(cpu, 1);
		tctx->wake_cpu = cpu;
	}
	tctx->queued_in = where;
}

/*
 * Send the features of @p, placed on @cpu, to user space; @pred_age_ns is the
 * age of the task's prediction (U64 max if it has none). @tctx is the task's
 * storage when the caller has looked it up already (enqueue), NULL to look it
 * up here, only once an event is due.
 *
 * An event only feeds the task's window in user space, which predicts again
 * at most every few tens of ms per task: no event while the task's prediction
 * is younger than event_refresh_ns (user space gets new events in time to
 * refresh it before the TTL), and at most one per event_gap_ns per task.
 */
static void send_event(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u32 source,
		       u64 pred_age_ns)
{
	struct gru_task_event *ev;
	u64 now, waiting, cons_pos;

	/*
	 * No model, or paused (predicted_cpu() read model_paused too: an array
	 * lookup the verifier inlines; passing its answer here would take a
	 * sixth argument, more than a BPF function call may have).
	 */
	if (!send_events || is_model_paused())
		return;
	if (pred_age_ns < event_refresh_ns) {
		stat_inc(&nr_events_fresh);
		return;
	}
	now = bpf_ktime_get_ns();
	if (!tctx)
		tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	if (tctx && tctx->last_event_ns && now - tctx->last_event_ns < event_gap_ns) {
		stat_inc(&nr_events_gap);
		return;
	}
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(&nr_ringbuf_drops);
		return;
	}
	if (tctx)
		tctx->last_event_ns = now;

	ev->stamp_ns = now;
	ev->pid = p->pid;
	ev->cpu = cpu;
	ev->prio = p->prio;
	ev->nr_cpus_allowed = p->nr_cpus_allowed;
	ev->runtime_ns = p->se.sum_exec_runtime;
	ev->nvcsw = p->nvcsw;
	ev->nivcsw = p->nivcsw;
	ev->switch_count = tctx ? tctx->switch_count : 0;
	ev->flags = p->flags;
	ev->source = source;
	bpf_probe_read_kernel_str(ev->comm, sizeof(ev->comm), p->comm);

	/*
	 * Wake the poller only once a batch is waiting or the oldest waiting
	 * event is wakeup_max_delay_ns old: a wake-up per event would add a
	 * context switch per placement. The bytes waiting include this record
	 * (and its 8-byte header): less than two records means it is the first.
	 * And only once until the poller consumes: while it waits for a CPU (a
	 * saturated machine) every later event found the batch still due and
	 * woke it again (lab, hackbench: 1 400-2 600 wake-ups for 2 300-3 500
	 * events a round), each an irq_work for nothing.
	 */
	waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	if (waiting < 2 * sizeof(*ev))
		pending_since_ns = now;
	if ((waiting >= wakeup_batch_bytes ||
	     (s64)(now - pending_since_ns) >= (s64)wakeup_max_delay_ns) &&
	    (cons_pos = bpf_ringbuf_query(&events, BPF_RB_CONS_POS)) != woken_at_cons_pos) {
		woken_at_cons_pos = cons_pos;
		bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
		stat_inc(&nr_ringbuf_wakeups);
	} else {
		bpf_ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	}
	stat_inc(&nr_events);
}

/* Why a placement did not follow a prediction. */
enum pred_miss {
	PRED_OK,
	PRED_MISSING,
	PRED_STALE,
	PRED_DISALLOWED,
	PRED_BUSY,
	PRED_PREV_IDLE,
	PRED_IGNORED,
	PRED_PAUSED,
};

/*
 * The CPU predicted for @p if the prediction is fresh and the CPU is allowed
 * (>= 0), otherwise -1 with the reason in @miss; @age_ns gets the prediction's
 * age (U64 max without one). Counts nothing: every placement is counted once,
 * where it happens.
 */
static s32 predicted_cpu(struct task_struct *p, enum pred_miss *miss, u64 *age_ns)
{
	struct gru_prediction *pred;
	u32 pid = p->pid;
	s64 age;
	s32 cpu;

	*age_ns = (u64)-1;
	/* No model: nothing ever writes pid_to_cpu, no lookup. */
	if (!send_events) {
		*miss = PRED_MISSING;
		return -1;
	}
	if (is_model_paused()) {
		*miss = PRED_PAUSED;
		return -1;
	}
	pred = bpf_map_lookup_elem(&pid_to_cpu, &pid);
	if (!pred) {
		*miss = PRED_MISSING;
		return -1;
	}
	age = (s64)(bpf_ktime_get_ns() - pred->stamp_ns);
	if (age >= 0)
		*age_ns = age;
	if (age > (s64)prediction_ttl_ns) {
		*miss = PRED_STALE;
		return -1;
	}
	cpu = pred->cpu;
	if (cpu < 0 || cpu >= scx_bpf_nr_cpu_ids() ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		*miss = PRED_DISALLOWED;
		return -1;
	}
	if (!apply_predictions) {
		*miss = PRED_IGNORED;
		return -1;
	}
	*miss = PRED_OK;
	return cpu;
}

/* Count one placement that did not follow a prediction. */
static void count_fallback(enum pred_miss miss)
{
	switch (miss) {
	case PRED_MISSING:
		stat_inc(&nr_pred_missing);
		break;
	case PRED_STALE:
		stat_inc(&nr_pred_stale);
		break;
	case PRED_DISALLOWED:
		stat_inc(&nr_pred_disallowed);
		break;
	case PRED_PREV_IDLE:
		stat_inc(&nr_pred_prev_idle);
		break;
	case PRED_IGNORED:
		stat_inc(&nr_pred_ignored);
		break;
	case PRED_PAUSED:
		stat_inc(&nr_pred_paused);
		break;
	default:
		stat_inc(&nr_pred_busy);
		break;
	}
}

/*
 * The task's virtual time, kept within one slice of the global one on both
 * sides. Behind: a long sleeper brings back at most one slice of credit.
 * Ahead: a low-weight task is charged up to 100x its run time (nice 19 has
 * weight 1), and the global vtime advances only by the CPUs' share of each
 * runnable task, so an unbounded lead could keep it off the CPUs for seconds
 * under overload: past sched_ext's watchdog, which then ejects the scheduler
 * (seen with khugepaged under hackbench). Weights still order tasks within
 * the bound.
 */
static u64 task_vtime(struct task_ctx *tctx)
{
	u64 vtime;

	/* (an early return: the verifier wants the NULL check before the offset) */
	if (!tctx)
		return vtime_now;
	vtime = tctx->vtime;

	if (vtime_before(vtime, vtime_now - slice_ns))
		vtime = vtime_now - slice_ns;
	else if (vtime_before(vtime_now + slice_ns, vtime))
		vtime = vtime_now + slice_ns;
	return vtime;
}

/*
 * The vtime of a task being queued (shared DSQ, wake queue): task_vtime(),
 * kept as the task's vtime, so its next slice is charged on top of the
 * clamped value.
 */
static u64 queued_vtime(struct task_ctx *tctx)
{
	u64 vtime = task_vtime(tctx);

	if (tctx)
		tctx->vtime = vtime;
	return vtime;
}

/* The burst part of a deadline: @awake, capped (0 without burst_deadline). */
static __always_inline u64 burst_extra(u64 awake)
{
	if (!burst_deadline)
		return 0;
	return awake < burst_cap_ns ? awake : burst_cap_ns;
}

/*
 * A deferred preemption's timer fired: preempt @cpu if the run it was armed
 * for is still going and something waits in the shared DSQ, @cpu's wake
 * queue or its local DSQ (the wakee, unless another CPU took it meanwhile; a
 * waking per-CPU kernel thread waits in the local DSQ).
 */
static int preempt_timerfn(void *map, int *key, struct preempt_timer *pt)
{
	struct cpu_run *run;
	u32 cpu = *key;

	run = bpf_map_lookup_elem(&cpu_runs, &cpu);
	if (run && run->weight && run->started_ns == pt->started_ns &&
	    (scx_bpf_dsq_nr_queued(GRU_FALLBACK_DSQ) ||
	     (wake_queues && scx_bpf_dsq_nr_queued(WAKE_DSQ(cpu))) ||
	     (kthread_preempt_ns && scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu)))) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_inc(&nr_timer_preempts);
	}
	return 0;
}

/* The task running on a CPU now, as running_now() sees it. */
struct run_now {
	u64 ran;		/* ns since it started */
	u64 ran_vtime;		/* the same in vtime (scaled by its weight) */
	u64 deadline;		/* its deadline now */
};

/*
 * The task running on @cpu (cpu_runs: kept with wakeup_preempt only): how long
 * it has run and its deadline now (its vtime and burst advance with the time
 * it has run since it started, scaled by its weight, as ops.stopping() will
 * charge) in @now. NULL when nothing running is recorded there.
 */
static struct cpu_run *running_now(u32 cpu, struct run_now *now)
{
	struct cpu_run *run = bpf_map_lookup_elem(&cpu_runs, &cpu);
	u64 t;

	if (!run || !run->weight)
		return NULL;
	t = bpf_ktime_get_ns();
	now->ran = t > run->started_ns ? t - run->started_ns : 0;
	now->ran_vtime = now->ran * 100 / run->weight;
	now->deadline = run->vtime + now->ran_vtime +
			burst_extra(run->awake_vtime + now->ran_vtime);
	return run;
}

/*
 * Whether the running task seen in @now is behind a wakee with deadline
 * @deadline: its deadline is later by more than preempt_margin_ns.
 */
static __always_inline bool runs_behind(const struct run_now *now, u64 deadline)
{
	return vtime_before(deadline + preempt_margin_ns, now->deadline);
}

/*
 * Whether a wakee with deadline @deadline may preempt the task running on
 * @cpu: that task has run at least preempt_min_run_ns, and its deadline now
 * is later than the wakee's by more than preempt_margin_ns. A CPU hog (it has
 * not slept for burst_cap_ns) may be preempted sooner: once it has run
 * @hog_run_ns (a kernel-thread wakee, kthread_preempt_ns; 0: not sooner). With
 * @defer, or @hog_run_ns, a wakee that would preempt a hog but for the
 * minimum arms @cpu's timer to preempt it once it has run that long
 * (@hog_run_ns, else deferred_preempt_ns; its deadline only grows meanwhile).
 */
static bool wakee_before_running(s32 cpu, u64 deadline, bool defer, u64 hog_run_ns)
{
	struct preempt_timer *pt;
	struct cpu_run *run;
	struct run_now now;
	u32 key = cpu;
	u64 after;

	run = running_now(cpu, &now);
	if (!run || !runs_behind(&now, deadline))
		return false;
	if (now.ran >= preempt_min_run_ns)
		return true;
	/* Sooner or deferred: a hog only. */
	if (run->awake_vtime + now.ran_vtime < burst_cap_ns)
		return false;
	if (hog_run_ns && now.ran >= hog_run_ns) {
		stat_inc(&nr_kthread_preempts);
		return true;
	}
	after = hog_run_ns ?: (defer ? deferred_preempt_ns : 0);
	if (!after || now.ran >= after)
		return false;
	pt = bpf_map_lookup_elem(&preempt_timers, &key);
	/* Once per run: a second wake-up would only move the same expiry. */
	if (pt && pt->started_ns != run->started_ns) {
		pt->started_ns = run->started_ns;
		if (!bpf_timer_start(&pt->timer, after - now.ran, 0))
			stat_inc(hog_run_ns ? &nr_kthread_preempts : &nr_deferred_preempts);
	}
	return false;
}

/* How long a hog runs before a wake-up of @p may preempt it (or 0). */
static __always_inline u64 wakee_hog_run_ns(struct task_struct *p)
{
	return (p->flags & GRU_PF_KTHREAD) ? kthread_preempt_ns : 0;
}

/*
 * A waking task @p that can only run on its CPU, queued on that CPU's local
 * DSQ: preempt the task running there if its deadline is later than @p's by
 * more than preempt_margin_ns (and it has run preempt_min_run_ns). The CPU
 * then runs its local DSQ first: @p.
 */
static void preempt_for_pinned(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	s32 cpu = scx_bpf_task_cpu(p);

	if (wakee_before_running(cpu, task_vtime(tctx) +
				 burst_extra(tctx ? tctx->last_burst : 0), false,
				 wakee_hog_run_ns(p))) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_inc(&nr_pinned_preempts);
	}
}

/* The slice for a task placed now (see slice_min_ns). */
static u64 task_slice(void)
{
	u64 slice;

	if (!slice_min_ns)
		return slice_ns;
	/*
	 * The shared DSQ's hint, not scx_bpf_dsq_nr_queued(): that is a DSQ
	 * lookup per placement. (Counting the wake queues' tasks too cost io8
	 * 0.5 % in the lab: every wake-up waits in one there.)
	 */
	slice = slice_ns / (nr_hint_shared + 1);
	if (slice < slice_min_ns)
		slice = slice_min_ns;
	if (slice < slice_ns)
		stat_inc(&nr_slices_shortened);
	return slice;
}

/* Whether any CPU is idle now. */
static bool any_cpu_idle(void)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	bool any = !bpf_cpumask_empty(idle);

	scx_bpf_put_idle_cpumask(idle);
	return any;
}

static __always_inline bool is_usersched(struct task_struct *p)
{
	return usersched_tgid && p->tgid == usersched_tgid;
}

/*
 * The CPU the in-BPF model picks for @p, last on @prev_cpu (>= 0, counted in
 * nr_bpf_model_decisions), or -1 without a valid model (counted in
 * nr_bpf_model_invalid).
 */
static s32 bpf_model_cpu(struct task_struct *p, s32 prev_cpu)
{
	struct bpf_model_scratch *s;
	struct gru_mlp_model *m;
	struct task_ctx *tctx;
	u32 zero = 0;
	s32 cpu;

	m = gru_mlp_active(&bpf_models, &bpf_model_active);
	s = bpf_map_lookup_elem(&bpf_model_scratch, &zero);
	if (!m || !s) {
		stat_inc(&nr_bpf_model_invalid);
		return -1;
	}
	tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	s->raw.runtime_ns = p->se.sum_exec_runtime;
	s->raw.nvcsw = p->nvcsw;
	s->raw.nivcsw = p->nivcsw;
	s->raw.switch_count = tctx ? tctx->switch_count : 0;
	s->raw.prio = p->prio;
	s->raw.nr_cpus_allowed = p->nr_cpus_allowed;
	s->raw.flags = p->flags;
	s->raw.prev_cpu = prev_cpu;
	cpu = gru_mlp_decide(m, &s->raw, &s->x, &s->logits);
	if (cpu < 0 || cpu >= GRU_MLP_MAX_CPUS) {
		stat_inc(&nr_bpf_model_invalid);
		return -1;
	}
	stat_inc(&nr_bpf_model_decisions);
	stat_inc(&nr_bpf_model_by_cpu[cpu & (GRU_MLP_MAX_CPUS - 1)]);
	if (bpf_model_seq_used != m->model_seq)
		bpf_model_seq_used = m->model_seq;
	return cpu;
}

/*
 * select_cpu with the in-BPF model: with a CPU idle somewhere, the model picks
 * one for @p and an idle, allowed pick gets @p on its local DSQ (the model
 * decides, an idle previous CPU included); otherwise the default policy: an
 * idle previous CPU keeps @p, else the kernel's selection. No event: nothing
 * in user space takes part.
 */
static s32 select_cpu_bpf_model(struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu;

	/* No CPU idle: nothing to place now; enqueue queues the task. */
	if (!any_cpu_idle()) {
		stat_inc(&nr_select_no_idle);
		return prev_cpu;
	}
	cpu = bpf_model_cpu(p, prev_cpu);
	if (cpu >= 0) {
		if (cpu < scx_bpf_nr_cpu_ids() && bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_test_and_clear_cpu_idle(cpu)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
			stat_inc(&nr_bpf_model_applied);
			if (cpu != prev_cpu)
				stat_inc(&nr_bpf_model_moved);
			return cpu;
		}
		stat_inc(&nr_bpf_model_busy);
	}
	if (bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
		stat_inc(&nr_direct_idle);
		return prev_cpu;
	}
	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
		stat_inc(&nr_direct_idle);
	}
	return cpu;
}

s32 BPF_STRUCT_OPS(gru_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	enum pred_miss miss;
	bool is_idle = false;
	u64 age;
	s32 cpu;

	/*
	 * scx_gru's own threads: the default selection, no prediction and no
	 * event (they are not part of the workload).
	 */
	if (is_usersched(p)) {
		cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
		if (is_idle) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
			stat_inc(&nr_usersched_local);
		}
		return cpu;
	}

	if (bpf_model)
		return select_cpu_bpf_model(p, prev_cpu, wake_flags);

	/*
	 * The thesis's select_cpu: an idle previous CPU keeps the task (warm
	 * caches, no migration), whatever the prediction says; a prediction
	 * of another CPU is only followed when the previous CPU is busy.
	 */
	if (bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
		cpu = predicted_cpu(p, &miss, &age);
		if (cpu == prev_cpu) {
			stat_inc(&nr_pred_applied);
			stat_inc(&nr_pred_applied_select);
		} else {
			count_fallback(cpu >= 0 ? PRED_PREV_IDLE : miss);
			stat_inc(&nr_direct_idle);
		}
		send_event(p, NULL, prev_cpu, GRU_SRC_SELECT_CPU, age);
		return prev_cpu;
	}

	/*
	 * No CPU idle (a saturated system): nothing below can place the task
	 * (the kernel's selection would return the previous CPU too), so leave
	 * it to ops.enqueue() without the prediction lookup and the idle scans.
	 */
	if (!any_cpu_idle()) {
		stat_inc(&nr_select_no_idle);
		return prev_cpu;
	}

	cpu = predicted_cpu(p, &miss, &age);

	/* A fresh prediction whose CPU is idle: place the task there now. */
	if (cpu >= 0 && scx_bpf_test_and_clear_cpu_idle(cpu)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
		stat_inc(&nr_pred_applied);
		stat_inc(&nr_pred_applied_select);
		if (cpu != prev_cpu)
			stat_inc(&nr_pred_moved);
		send_event(p, NULL, cpu, GRU_SRC_SELECT_CPU, age);
		return cpu;
	}

	/*
	 * Default policy: the kernel's selection (any idle CPU); an idle CPU
	 * gets the task on its local DSQ directly. Without an idle CPU the
	 * decision is deferred to ops.enqueue(), which looks at the prediction
	 * again.
	 */
	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
		count_fallback(miss);
		stat_inc(&nr_direct_idle);
		send_event(p, NULL, cpu, GRU_SRC_SELECT_CPU, age);
	}
	return cpu;
}

/*
 * The CPU whose wake queue a wake-up of @p, last on @prev_cpu, with deadline
 * @deadline, waits in: with wake_balance, one other CPU drawn at random if @p
 * may run there, its wake queue is at least wake_balance tasks shorter than
 * @prev_cpu's, and the task running there has a deadline later than @p's by
 * more than preempt_margin_ns (a CPU hog, not another short burst: without
 * this test io8's I/O threads moved between the queues 280 times a second
 * and io8 fell from 0.98 to 0.96 x EEVDF, runs 87 and 91); else
 * @prev_cpu. With nothing running recorded there (an idle CPU, or no
 * wakeup_preempt) the queues' lengths alone decide: io8's remaining moves,
 * about 26 a second, all went to such CPUs (run 94, where a stricter test,
 * that the running task has not slept for the burst cap, left them as they
 * were and did not change the mixed load's 1-2 moves a second either).
 */
static s32 wake_queue_cpu(struct task_struct *p, s32 prev_cpu, u64 deadline)
{
	struct run_now now;
	u32 nr_cpus = scx_bpf_nr_cpu_ids();
	u64 *own, *other;
	u32 cand;

	if (!wake_balance || prev_cpu < 0)
		return prev_cpu;
	own = wake_count(prev_cpu);
	if (!own || *own < wake_balance)
		return prev_cpu;
	if (nr_cpus > GRU_MAX_CPUS)
		nr_cpus = GRU_MAX_CPUS;
	if (nr_cpus < 2)
		return prev_cpu;
	cand = ((u32)prev_cpu + 1 + bpf_get_prandom_u32() % (nr_cpus - 1)) % nr_cpus;
	if (!bpf_cpumask_test_cpu(cand, p->cpus_ptr))
		return prev_cpu;
	other = wake_count(cand);
	if (!other || *own < *other + wake_balance)
		return prev_cpu;
	if (running_now(cand, &now) && !runs_behind(&now, deadline))
		return prev_cpu;
	stat_inc(&nr_wake_balanced);
	return cand;
}

void BPF_STRUCT_OPS(gru_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx;
	enum pred_miss miss;
	s32 cpu, idle_cpu, prev_cpu;
	u64 age, key, extra, slice, wake_deadline, dsq = GRU_FALLBACK_DSQ;
	u32 where = QUEUED_SHARED;
	s32 queue_cpu;

	/*
	 * scx_gru's own thread (ring-buffer poller and inference) runs next on
	 * its CPU when it wakes up: predictions that wait behind the load go
	 * stale. Out of slice, it queues by vtime like any task (see
	 * usersched_always_first). No event: it is not part of the workload.
	 */
	if (is_usersched(p)) {
		if (usersched_always_first || (enq_flags & SCX_ENQ_WAKEUP)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), enq_flags);
			stat_inc(&nr_usersched_local);
		} else {
			tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
			slice = task_slice();
			if (tctx)
				hint_queued(tctx, QUEUED_SHARED, 0);
			scx_bpf_dsq_insert_vtime(p, GRU_FALLBACK_DSQ, slice,
						 queued_vtime(tctx), enq_flags);
			stat_inc(&nr_usersched_queued);
		}
		return;
	}

	/*
	 * Tasks that can run on one CPU only go straight to that CPU. No event:
	 * no prediction can place them anywhere else. A waking one preempts
	 * the task running there if that one's deadline is clearly later.
	 */
	if (p->nr_cpus_allowed == 1) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), enq_flags);
		stat_inc(&nr_pinned_local);
		if (wakeup_preempt && pinned_preempt && (enq_flags & SCX_ENQ_WAKEUP))
			preempt_for_pinned(p);
		return;
	}

	cpu = predicted_cpu(p, &miss, &age);
	if (cpu >= 0) {
		/*
		 * Follow the prediction only if the CPU is idle: queueing behind
		 * a busy CPU's slice while another CPU may free up first cannot
		 * gain much. Otherwise a queue.
		 */
		if (scx_bpf_test_and_clear_cpu_idle(cpu)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, task_slice(), enq_flags);
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			stat_inc(&nr_pred_applied);
			if (cpu != scx_bpf_task_cpu(p))
				stat_inc(&nr_pred_moved);
			send_event(p, NULL, cpu, GRU_SRC_ENQUEUE, age);
			return;
		}
		miss = PRED_BUSY;
	}
	count_fallback(miss);

	/*
	 * Fallback: a wake-up goes to its CPU's wake queue (see wake_queues;
	 * another CPU's with wake_balance), anything else to the shared DSQ,
	 * both ordered by deadline; wake an idle CPU for it, or, for a wake-up
	 * clearly before the task running on the CPU of its queue, preempt
	 * that CPU (which then dispatches the earliest deadline: this task,
	 * unless another is owed more).
	 */
	tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	key = queued_vtime(tctx);
	if (tctx) {
		extra = burst_extra(tctx->awake_vtime);
		key += extra;
		if (extra)
			stat_inc(&nr_burst_keyed);
	}
	/* Against a running task: the key plus the burst before it slept. */
	wake_deadline = key + burst_extra(tctx ? tctx->last_burst : 0);
	prev_cpu = scx_bpf_task_cpu(p);
	/* (before the task itself is counted as waiting) */
	slice = task_slice();
	/*
	 * (A woken task's CPU is one it may run on: the kernel checks the one
	 * select_cpu returns. So no cpumask test here, nor before preempting.)
	 */
	queue_cpu = prev_cpu;
	if (wake_queues && (enq_flags & SCX_ENQ_WAKEUP) && prev_cpu < GRU_MAX_CPUS) {
		queue_cpu = wake_queue_cpu(p, prev_cpu, wake_deadline);
		dsq = WAKE_DSQ(queue_cpu);
		where = QUEUED_WAKE;
		stat_inc(&nr_wake_queued);
	}
	if (tctx)
		hint_queued(tctx, where, queue_cpu);
	scx_bpf_dsq_insert_vtime(p, dsq, slice, key, enq_flags);
	stat_inc(&nr_shared_enqueued);
	/*
	 * (Reading the idle mask costs half of a scan for an idle CPU, which
	 * finds none on a saturated machine, where most tasks come here.)
	 */
	idle_cpu = any_cpu_idle() ? scx_bpf_pick_idle_cpu(p->cpus_ptr, 0) : -1;
	if (idle_cpu >= 0) {
		scx_bpf_kick_cpu(idle_cpu, SCX_KICK_IDLE);
	} else if (wakeup_preempt && (enq_flags & SCX_ENQ_WAKEUP) &&
		   wakee_before_running(queue_cpu, wake_deadline, true, wakee_hog_run_ns(p))) {
		scx_bpf_kick_cpu(queue_cpu, SCX_KICK_PREEMPT);
		stat_inc(&nr_wakeup_preempts);
	}
	send_event(p, tctx, queue_cpu, GRU_SRC_ENQUEUE, age);
}

/* What dispatch_affine() found. */
enum affine_scan {
	AFFINE_EMPTY,		/* the shared DSQ is empty */
	AFFINE_MOVED,		/* a task moved to the CPU's local DSQ */
	AFFINE_NONE,		/* tasks queued, none to move here */
};

/*
 * With dispatch_affinity_ns: the first of the shared DSQ's first DISPATCH_SCAN
 * tasks that last ran on @cpu and may run there, within the window of the
 * head's deadline, moved to @cpu's local DSQ.
 */
static enum affine_scan dispatch_affine(s32 cpu)
{
	struct task_struct *p;
	u64 head_key = 0;
	u32 seen = 0;

	bpf_for_each(scx_dsq, p, GRU_FALLBACK_DSQ, 0) {
		if (!seen)
			head_key = p->scx.dsq_vtime;
		else if (vtime_before(head_key + dispatch_affinity_ns, p->scx.dsq_vtime))
			break;
		if (scx_bpf_task_cpu(p) == cpu && bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			if (seen)
				stat_inc(&nr_dispatch_affine);
			return AFFINE_MOVED;
		}
		if (++seen >= DISPATCH_SCAN)
			break;
	}
	return seen ? AFFINE_NONE : AFFINE_EMPTY;
}

/*
 * The head of @cpu's wake queue moved to its local DSQ, unless the shared
 * DSQ's head has an earlier deadline or the wake queue is empty.
 */
static bool dispatch_wake_queue(s32 cpu)
{
	struct task_struct *own, *shared;

	/* Nothing in the shared DSQ: one lookup, the move's. */
	if (!nr_hint_shared)
		return scx_bpf_dsq_move_to_local(WAKE_DSQ(cpu), 0);
	own = scx_bpf_dsq_peek(WAKE_DSQ(cpu));
	if (!own)
		return false;
	shared = scx_bpf_dsq_peek(GRU_FALLBACK_DSQ);
	if (shared && vtime_before(shared->scx.dsq_vtime, own->scx.dsq_vtime))
		return false;
	return scx_bpf_dsq_move_to_local(WAKE_DSQ(cpu), 0);
}

/* With nothing else to run, @cpu takes the head of another CPU's wake queue. */
static bool steal_wake_queue(s32 cpu)
{
	u32 nr_cpus = scx_bpf_nr_cpu_ids(), i;
	s32 victim;

	if (nr_cpus > GRU_MAX_CPUS)
		nr_cpus = GRU_MAX_CPUS;

	bpf_for(i, 1, nr_cpus) {
		victim = (cpu + i) % nr_cpus;
		if (scx_bpf_dsq_move_to_local(WAKE_DSQ(victim), 0)) {
			stat_inc(&nr_wake_stolen);
			return true;
		}
	}
	return false;
}

void BPF_STRUCT_OPS(gru_dispatch, s32 cpu, struct task_struct *prev)
{
	/*
	 * One DSQ lookup (a hash lookup in the kernel) per kfunc here: the
	 * scan, when it finds the DSQ empty (a CPU going idle on a light load:
	 * most dispatches), skips the move; without the scan, the move alone
	 * finds an empty DSQ. (Asking scx_bpf_dsq_nr_queued() first was one
	 * lookup more on every dispatch: 14 % of the op's cost on io8, lab
	 * under instruction counting.)
	 */
	enum affine_scan scan;

	if (wake_queues && nr_hint_wake && dispatch_wake_queue(cpu))
		return;
	scan = dispatch_affinity_ns ? dispatch_affine(cpu) : AFFINE_NONE;
	if (scan == AFFINE_MOVED ||
	    (scan == AFFINE_NONE && scx_bpf_dsq_move_to_local(GRU_FALLBACK_DSQ, 0)))
		return;
	if (wake_queues && nr_hint_wake && steal_wake_queue(cpu))
		return;
	/*
	 * Nothing else to run here: @prev, out of slice, keeps the CPU. Left to
	 * the kernel, it would get the default slice (SCX_SLICE_DFL, 20 ms: the
	 * kernel's SCX_EV_REFILL_SLICE_DFL counted ~48 a second beside a CPU hog),
	 * and whatever came to this CPU next without preempting (scx_gru's own
	 * thread, a wake-up that finds no CPU idle and does not preempt) waited
	 * up to 20 ms (16 ms measured for scx_gru's thread). Our slice instead,
	 * through the kfunc where the kernel has it (6.19: it warns that writing
	 * p->scx.slice directly is deprecated; the compat wrapper writes it
	 * directly on older kernels).
	 */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		scx_bpf_task_set_slice(prev, task_slice());
		stat_inc(&nr_prev_kept);
	}
}

/* The kernel's total queue wait of @p (ns), 0 on a kernel without it. */
static __always_inline u64 task_run_delay(struct task_struct *p)
{
	if (bpf_core_field_exists(p->sched_info))
		return p->sched_info.run_delay;
	return 0;
}

/*
 * Count the queue wait before the run of @p that is ending (the kernel adds it
 * to run_delay as the task starts running, after ops.running()), by the
 * task's burst before it is charged (see SHORT_BURST_NS).
 */
static __always_inline void count_wait(struct task_struct *p, struct task_ctx *tctx)
{
	u64 total = task_run_delay(p);
	u64 wait = total > tctx->run_delay ? total - tctx->run_delay : 0;

	tctx->run_delay = total;
	if (tctx->last_burst < SHORT_BURST_NS && tctx->awake_vtime < SHORT_BURST_NS) {
		__sync_fetch_and_add(&wait_ns_short, wait);
		stat_inc(&nr_waits_short);
	} else {
		__sync_fetch_and_add(&wait_ns_long, wait);
		stat_inc(&nr_waits_long);
	}
}

void BPF_STRUCT_OPS(gru_running, struct task_struct *p)
{
	struct task_ctx *tctx;
	struct cpu_run *run;
	/* ops.running() runs on the task's CPU: no kfunc to ask which. */
	u32 key = bpf_get_smp_processor_id();
	u64 now = bpf_ktime_get_ns();
	u64 vtime = vtime_now;

	tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	if (tctx) {
		vtime = tctx->vtime;
		tctx->switch_count++;
		tctx->run_start_ns = now;
		if (tctx->queued_in)
			hint_queued(tctx, QUEUED_NONE, 0);
	}
	if (vtime_before(vtime_now, vtime))
		vtime_now = vtime;
	if (wakeup_preempt) {
		run = bpf_map_lookup_elem(&cpu_runs, &key);
		if (run) {
			run->vtime = vtime;
			run->started_ns = now;
			run->weight = p->scx.weight ?: 1;
			run->awake_vtime = tctx ? tctx->awake_vtime : 0;
		}
	}
}

void BPF_STRUCT_OPS(gru_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	u64 now = bpf_ktime_get_ns(), used = 0, charge;
	struct cpu_run *run;
	/* ops.stopping() runs on the task's CPU too. */
	u32 key = bpf_get_smp_processor_id();

	/*
	 * The time it ran (the slice may have been refilled or shortened).
	 * (Charging the growth of p->se.sum_exec_runtime instead spares this
	 * clock read, but cost io8 0.7 % on two CPUs in the lab, perhaps as it
	 * leaves out interrupt time: results/2026-11-26-gru-io8-on-one-cpu.)
	 */
	if (tctx && tctx->run_start_ns && now > tctx->run_start_ns)
		used = now - tctx->run_start_ns;
	if (tctx)
		count_wait(p, tctx);

	/* Charge the time used, inversely to the task's weight. */
	charge = used * 100 / p->scx.weight;
	if (tctx)
		tctx->vtime += charge;
	/* (kept up to SHORT_BURST_NS at least, for the wait classes) */
	if (tctx && (tctx->awake_vtime < burst_cap_ns || tctx->awake_vtime < SHORT_BURST_NS))
		tctx->awake_vtime += charge;
	if (wakeup_preempt) {
		run = bpf_map_lookup_elem(&cpu_runs, &key);
		if (run)
			run->weight = 0;
	}
}

/* A task waking up starts a new burst. */
void BPF_STRUCT_OPS(gru_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx;

	if (!(enq_flags & SCX_ENQ_WAKEUP))
		return;
	tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);
	if (tctx) {
		tctx->last_burst = tctx->awake_vtime;
		tctx->awake_vtime = 0;
	}
}

void BPF_STRUCT_OPS(gru_enable, struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctx_stor, p, 0, 0);

	if (tctx) {
		tctx->vtime = vtime_now;
		tctx->run_delay = task_run_delay(p);
	}
}

s32 BPF_STRUCT_OPS(gru_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	if (!bpf_task_storage_get(&task_ctx_stor, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE))
		return -ENOMEM;
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(gru_init)
{
	struct preempt_timer *pt;
	u32 cpu, nr_cpus = scx_bpf_nr_cpu_ids();
	s32 ret;

	if (wakeup_preempt && (deferred_preempt_ns || kthread_preempt_ns)) {
		bpf_for(cpu, 0, nr_cpus) {
			pt = bpf_map_lookup_elem(&preempt_timers, &cpu);
			if (!pt)
				break;
			if (bpf_timer_init(&pt->timer, &preempt_timers, CLOCK_MONOTONIC) ||
			    bpf_timer_set_callback(&pt->timer, preempt_timerfn)) {
				scx_bpf_error("cannot set up the preemption timer of CPU %u", cpu);
				return -EINVAL;
			}
		}
	}
	if (wake_queues) {
		if (!bpf_ksym_exists(scx_bpf_dsq_peek)) {
			scx_bpf_error("wake queues need scx_bpf_dsq_peek() (Linux 6.19 or later): "
				      "run scx_gru with --no-wake-queues");
			return -EOPNOTSUPP;
		}
		if (nr_cpus > GRU_MAX_CPUS)
			nr_cpus = GRU_MAX_CPUS;
		bpf_for(cpu, 0, nr_cpus) {
			ret = scx_bpf_create_dsq(WAKE_DSQ(cpu), -1);
			if (ret) {
				scx_bpf_error("cannot create the wake queue of CPU %u: %d", cpu, ret);
				return ret;
			}
		}
	}
	return scx_bpf_create_dsq(GRU_FALLBACK_DSQ, -1);
}

void BPF_STRUCT_OPS(gru_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(gru_ops,
	       .select_cpu		= (void *)gru_select_cpu,
	       .enqueue			= (void *)gru_enqueue,
	       .dispatch		= (void *)gru_dispatch,
	       .runnable		= (void *)gru_runnable,
	       .running			= (void *)gru_running,
	       .stopping		= (void *)gru_stopping,
	       .enable			= (void *)gru_enable,
	       .init_task		= (void *)gru_init_task,
	       .init			= (void *)gru_init,
	       .exit			= (void *)gru_exit,
	       .timeout_ms		= 5000,
	       .name			= "gru");
