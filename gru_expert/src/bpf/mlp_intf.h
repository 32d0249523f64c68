/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gru's in-BPF placement model: the layout of the model map's value and of the
 * benchmark's input, shared by mlp.bpf.h, mlp_bench.bpf.c and the Rust side (bindgen).
 * Python's reference of the arithmetic: train/mlp_fixed.py (its constants must match).
 *
 * Invariant: a model in the map is used only if magic, version and shape pass
 * gru_mlp_check(); weights and biases are within +-GRU_MLP_WEIGHT_MAX and activations are
 * clamped to +-GRU_MLP_ACT_MAX, so no 64-bit accumulator can overflow (23 * 2^20 * 2^30 < 2^63).
 * A change to struct gru_mlp_model changes the model ABI: bump GRU_MLP_VERSION.
 */
#ifndef __GRU_MLP_INTF_H
#define __GRU_MLP_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed int s32;
typedef signed long long s64;
#endif /* __VMLINUX_H__ */

enum gru_mlp_consts {
	/* "MLP1" in the first word of a model: the map slot was filled. */
	GRU_MLP_MAGIC		= 0x314c504d,
	/* Version of struct gru_mlp_model (and of the model file, asa.gru-mlp). */
	GRU_MLP_VERSION		= 1,
	/* Task features per event, as GRU_NR_TASK_FEATURES in intf.h. */
	GRU_MLP_TASK_FEATURES	= 7,
	/* Most CPUs (outputs, and previous-CPU inputs) a model may have. */
	GRU_MLP_MAX_CPUS	= 16,
	GRU_MLP_MAX_IN		= GRU_MLP_TASK_FEATURES + GRU_MLP_MAX_CPUS,
	GRU_MLP_MAX_HIDDEN	= 16,
	/* Largest number of fractional bits a model may use (Q21.11 uses 11). */
	GRU_MLP_MAX_FRAC_BITS	= 16,
	/* Bound of every weight and bias, and of every activation. */
	GRU_MLP_WEIGHT_MAX	= (1 << 20) - 1,
	GRU_MLP_ACT_MAX		= (1 << 30) - 1,
	/* Feature clamps: prio to 0..255, nr_cpus_allowed to 0..4096. */
	GRU_MLP_PRIO_MAX	= 255,
	GRU_MLP_ALLOWED_MAX	= 4096,
	/* Inputs the timed benchmark program cycles through. */
	GRU_MLP_BENCH_SLOTS	= 64,
	/*
	 * Model slots of a scheduler's model map: user space writes a replacement into the
	 * slot not in use, then names it in the active map (0: none; else slot + 1), so a
	 * decision never reads a half-written model.
	 */
	GRU_MLP_SLOTS		= 2,
};

/* Errors of gru_mlp_check() / gru_mlp_decide() (returned negated). */
enum gru_mlp_err {
	GRU_MLP_ERR_NO_MODEL	= 1,	/* no map slot, or the magic is not set */
	GRU_MLP_ERR_VERSION	= 2,	/* another struct gru_mlp_model version */
	GRU_MLP_ERR_SHAPE	= 3,	/* sizes beyond the bounds or n_in != 7 + n_out */
};

/* The model map's single value: an (7 + C) -> H ReLU -> C MLP in fixed point. */
struct gru_mlp_model {
	u32 magic;
	u32 version;
	u32 n_in;
	u32 n_hidden;
	u32 n_out;
	u32 frac_bits;
	u32 model_seq;		/* bumped by user space at every model update */
	u32 pad;
	s32 w1[GRU_MLP_MAX_HIDDEN][GRU_MLP_MAX_IN];
	s32 b1[GRU_MLP_MAX_HIDDEN];
	s32 w2[GRU_MLP_MAX_CPUS][GRU_MLP_MAX_HIDDEN];
	s32 b2[GRU_MLP_MAX_CPUS];
};

/* The raw task state one decision reads (what select_cpu has at hand). */
struct gru_mlp_raw {
	u64 runtime_ns;
	u64 nvcsw;
	u64 nivcsw;
	u64 switch_count;
	s32 prio;
	u32 nr_cpus_allowed;
	u32 flags;
	s32 prev_cpu;		/* -1: none */
};

/* Context of the SEC("syscall") program gru_mlp_eval: input, then what it computed. */
struct gru_mlp_io {
	struct gru_mlp_raw raw;
	s32 features[GRU_MLP_MAX_IN];
	s32 logits[GRU_MLP_MAX_CPUS];
	s32 cpu;		/* the decision, or -enum gru_mlp_err */
	u32 model_seq;		/* gru_mlp_eval_active: the model_seq of the model used (0: none) */
};

#endif /* __GRU_MLP_INTF_H */
