/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_floor: the cheapest sched_ext scheduler, a measuring control for the
 * scx_gru benchmark (not an expert). The kernel's idle-CPU selection puts a
 * waking task on an idle CPU's local DSQ; every other task goes to the global
 * FIFO DSQ with the default slice (scx_simple's FIFO mode). What a load loses
 * under it against EEVDF is what sched_ext itself costs on this machine, with
 * no policy to blame: the floor for every sched_ext scheduler.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

s32 BPF_STRUCT_OPS(floor_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

	if (is_idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	return cpu;
}

void BPF_STRUCT_OPS(floor_enqueue, struct task_struct *p, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(floor_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(floor_ops,
	       .select_cpu	= (void *)floor_select_cpu,
	       .enqueue		= (void *)floor_enqueue,
	       .exit		= (void *)floor_exit,
	       .timeout_ms	= 5000,
	       .name		= "floor");
