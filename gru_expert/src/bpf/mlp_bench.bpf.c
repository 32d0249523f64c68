/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The in-BPF placement model (mlp.bpf.h) as stand-alone programs for the host, which has BPF
 * but no sched_ext; run through BPF_PROG_TEST_RUN by benches/bpf_mlp.rs and tests/bpf_mlp.rs:
 *   - gru_mlp_eval (SEC("syscall")): one decision on the input in its context, writes the
 *     features, logits and CPU back (the golden-case check against train/mlp_fixed.py);
 *   - gru_mlp_bench (SEC("tc")): one decision per run on the next of GRU_MLP_BENCH_SLOTS
 *     inputs in bench_inputs, its CPU into bench_cpus (syscall programs take no repeat count;
 *     tc programs do, and the kernel reports the mean ns per run);
 *   - gru_mlp_bench_empty (SEC("tc")): the same map lookups without the model, the floor of
 *     the harness;
 *   - gru_mlp_eval_active (SEC("syscall")): gru_mlp_eval on the model scx_gru's select_cpu
 *     would use, through the same gru_mlp_active() on two slots and an active map
 *     (gru_mlp_slots, gru_mlp_active_slot), which user space fills as it fills scx_gru's
 *     (mlp::ModelSlots): the run-time swap, tested on the host.
 * Invariant: a model is read only from gru_mlp_models[0] (or the active slot) and used only if
 * gru_mlp_check() accepts it.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "mlp_intf.h"
#include "mlp.bpf.h"

char _license[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct gru_mlp_model);
} gru_mlp_models SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MLP_BENCH_SLOTS);
	__type(key, u32);
	__type(value, struct gru_mlp_raw);
} bench_inputs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MLP_BENCH_SLOTS);
	__type(key, u32);
	__type(value, s32);
} bench_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GRU_MLP_SLOTS);
	__type(key, u32);
	__type(value, struct gru_mlp_model);
} gru_mlp_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} gru_mlp_active_slot SEC(".maps");

u64 bench_next;
u64 bench_runs;

SEC("syscall")
int gru_mlp_eval(struct gru_mlp_io *io)
{
	struct gru_mlp_vec x = {};
	struct gru_mlp_logits logits = {};
	struct gru_mlp_model *m;
	u32 zero = 0;
	int i;

	m = bpf_map_lookup_elem(&gru_mlp_models, &zero);
	io->cpu = gru_mlp_decide(m, &io->raw, &x, &logits);
#pragma unroll
	for (i = 0; i < GRU_MLP_MAX_IN; i++)
		io->features[i] = x.v[i];
#pragma unroll
	for (i = 0; i < GRU_MLP_MAX_CPUS; i++)
		io->logits[i] = logits.v[i];
	return 0;
}

SEC("syscall")
int gru_mlp_eval_active(struct gru_mlp_io *io)
{
	struct gru_mlp_vec x = {};
	struct gru_mlp_logits logits = {};
	struct gru_mlp_model *m;
	int i;

	m = gru_mlp_active(&gru_mlp_slots, &gru_mlp_active_slot);
	io->cpu = m ? gru_mlp_decide(m, &io->raw, &x, &logits) : -GRU_MLP_ERR_NO_MODEL;
	io->model_seq = m ? m->model_seq : 0;
#pragma unroll
	for (i = 0; i < GRU_MLP_MAX_IN; i++)
		io->features[i] = x.v[i];
#pragma unroll
	for (i = 0; i < GRU_MLP_MAX_CPUS; i++)
		io->logits[i] = logits.v[i];
	return 0;
}

SEC("tc")
int gru_mlp_bench(struct __sk_buff *skb)
{
	struct gru_mlp_vec x;
	struct gru_mlp_logits logits;
	struct gru_mlp_model *m;
	struct gru_mlp_raw *raw;
	u32 zero = 0, slot = bench_next++ % GRU_MLP_BENCH_SLOTS;
	s32 *out;

	m = bpf_map_lookup_elem(&gru_mlp_models, &zero);
	raw = bpf_map_lookup_elem(&bench_inputs, &slot);
	out = bpf_map_lookup_elem(&bench_cpus, &slot);
	if (!raw || !out)
		return 1;
	*out = gru_mlp_decide(m, raw, &x, &logits);
	bench_runs++;
	return 0;
}

SEC("tc")
int gru_mlp_bench_empty(struct __sk_buff *skb)
{
	struct gru_mlp_model *m;
	struct gru_mlp_raw *raw;
	u32 zero = 0, slot = bench_next++ % GRU_MLP_BENCH_SLOTS;
	s32 *out;

	m = bpf_map_lookup_elem(&gru_mlp_models, &zero);
	raw = bpf_map_lookup_elem(&bench_inputs, &slot);
	out = bpf_map_lookup_elem(&bench_cpus, &slot);
	if (!m || !raw || !out)
		return 1;
	*out = raw->prev_cpu;
	bench_runs++;
	return 0;
}
