/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gru's in-BPF placement model: integer inference of a (7 + C) -> H ReLU -> C MLP in
 * fixed point (Q(32-F).F words, F = frac_bits, Q21.11 by default as in the seed
 * ml_load_balancing_paper.txt), from the raw task state a scheduler callback has at hand.
 * Include after vmlinux.h, bpf_helpers.h and mlp_intf.h.
 *
 * Invariant: the arithmetic is bit for bit that of train/mlp_fixed.py (fixed_features,
 * fixed_logits, argmax_first): products in s64, arithmetic right shift by F (floor), clamp to
 * +-GRU_MLP_ACT_MAX, first maximum on ties. The model is used only after gru_mlp_check();
 * every loop is bounded by a GRU_MLP_MAX_* constant and stops early at the model's size;
 * gru_mlp_dot and gru_mlp_infer are global functions, each verified once.
 */
#ifndef __GRU_MLP_BPF_H
#define __GRU_MLP_BPF_H

#define GRU_MLP_PF_KTHREAD 0x00200000

/* 0 if m holds a usable model, else -enum gru_mlp_err. */
static __always_inline int gru_mlp_check(const struct gru_mlp_model *m)
{
	if (!m || m->magic != GRU_MLP_MAGIC)
		return -GRU_MLP_ERR_NO_MODEL;
	if (m->version != GRU_MLP_VERSION)
		return -GRU_MLP_ERR_VERSION;
	if (m->n_out < 1 || m->n_out > GRU_MLP_MAX_CPUS ||
	    m->n_hidden < 1 || m->n_hidden > GRU_MLP_MAX_HIDDEN ||
	    m->n_in != GRU_MLP_TASK_FEATURES + m->n_out ||
	    m->frac_bits > GRU_MLP_MAX_FRAC_BITS)
		return -GRU_MLP_ERR_SHAPE;
	return 0;
}

/*
 * The model a decision may use (the "model ready" check): the slot of @models (an array map
 * of GRU_MLP_SLOTS struct gru_mlp_model) that @active (an array map of one u32: 0 no model,
 * else slot + 1) names, if gru_mlp_check() accepts it; else NULL.
 */
static __always_inline struct gru_mlp_model *gru_mlp_active(void *models, void *active)
{
	struct gru_mlp_model *m;
	u32 zero = 0, slot, *a;

	a = bpf_map_lookup_elem(active, &zero);
	if (!a || !*a || *a > GRU_MLP_SLOTS)
		return NULL;
	slot = *a - 1;
	m = bpf_map_lookup_elem(models, &slot);
	if (gru_mlp_check(m))
		return NULL;
	return m;
}

/* Index of the most significant set bit of v (v >= 1). */
static __always_inline u32 gru_mlp_msb64(u64 v)
{
	u32 n = 0;

	if (v >= (1ULL << 32)) { v >>= 32; n += 32; }
	if (v >= (1ULL << 16)) { v >>= 16; n += 16; }
	if (v >= (1ULL << 8)) { v >>= 8; n += 8; }
	if (v >= (1ULL << 4)) { v >>= 4; n += 4; }
	if (v >= (1ULL << 2)) { v >>= 2; n += 2; }
	if (v >= (1ULL << 1)) n += 1;
	return n;
}

/* log2(1 + x) in Q.F with a linear mantissa (x saturated below 2^64 - 1). */
static __always_inline s32 gru_mlp_log2q_1p(u64 x, u32 f)
{
	u64 v = (x > ~0ULL - 1 ? ~0ULL - 1 : x) + 1;
	u32 n = gru_mlp_msb64(v);
	u64 mask = (1ULL << f) - 1;
	u64 frac = n >= f ? (v >> (n - f)) & mask : (v << (f - n)) & mask;

	return (s32)(((u64)n << f) | frac);
}

static __always_inline s64 gru_mlp_clamp(s64 v)
{
	if (v > GRU_MLP_ACT_MAX)
		return GRU_MLP_ACT_MAX;
	if (v < -GRU_MLP_ACT_MAX)
		return -GRU_MLP_ACT_MAX;
	return v;
}

/* A vector of inputs or hidden units, and one of logits (global functions take sized structs). */
struct gru_mlp_vec {
	s32 v[GRU_MLP_MAX_IN];
};

struct gru_mlp_logits {
	s32 v[GRU_MLP_MAX_CPUS];
};

/*
 * The fixed-point features of one decision into x (n_in of them used): prio,
 * nr_cpus_allowed, log2(1 + runtime_ns / 1024), log2(1 + nvcsw), log2(1 + nivcsw),
 * is-kthread, log2(1 + switch_count), then 1.0 on the previous CPU's column (all
 * GRU_MLP_MAX_CPUS columns are written: no data-dependent exit for the verifier to follow).
 */
static __always_inline void gru_mlp_features(u32 f, const struct gru_mlp_raw *raw,
					     struct gru_mlp_vec *x)
{
	s32 prio = raw->prio;
	u32 allowed = raw->nr_cpus_allowed, c;

	f &= 31;
	if (prio < 0)
		prio = 0;
	if (prio > GRU_MLP_PRIO_MAX)
		prio = GRU_MLP_PRIO_MAX;
	if (allowed > GRU_MLP_ALLOWED_MAX)
		allowed = GRU_MLP_ALLOWED_MAX;
	x->v[0] = prio << f;
	x->v[1] = (s32)(allowed << f);
	x->v[2] = gru_mlp_log2q_1p(raw->runtime_ns >> 10, f);
	x->v[3] = gru_mlp_log2q_1p(raw->nvcsw, f);
	x->v[4] = gru_mlp_log2q_1p(raw->nivcsw, f);
	x->v[5] = (raw->flags & GRU_MLP_PF_KTHREAD) ? (1 << f) : 0;
	x->v[6] = gru_mlp_log2q_1p(raw->switch_count, f);
	for (c = 0; c < GRU_MLP_MAX_CPUS; c++)
		x->v[GRU_MLP_TASK_FEATURES + c] = raw->prev_cpu == (s32)c ? (1 << f) : 0;
}

/*
 * sum(w[i] * x[i]) over i < n (n <= GRU_MLP_MAX_IN) in s64. A global function: the verifier
 * checks it once, not once per caller path.
 */
__noinline s64 gru_mlp_dot(const struct gru_mlp_vec *w, const struct gru_mlp_vec *x, u32 n)
{
	s64 acc = 0;
	u32 i;

	if (!w || !x)
		return 0;
	for (i = 0; i < GRU_MLP_MAX_IN; i++) {
		if (i >= n)
			break;
		acc += (s64)w->v[i] * x->v[i];
	}
	return acc;
}

/*
 * The MLP on features x: logits into out, returns the CPU of the first largest logit
 * (0 .. n_out - 1), or -enum gru_mlp_err if m is missing or malformed. A global function,
 * verified once.
 */
__noinline int gru_mlp_infer(const struct gru_mlp_model *m, const struct gru_mlp_vec *x,
			     struct gru_mlp_logits *out)
{
	struct gru_mlp_vec h = {};
	u32 j, f, n_in, n_hidden, n_out;
	int err, best_cpu = 0;
	s64 best = 0;

	if (!x || !out)
		return -GRU_MLP_ERR_NO_MODEL;
	err = gru_mlp_check(m);
	if (err)
		return err;
	f = m->frac_bits & 31;
	n_in = m->n_in;
	n_hidden = m->n_hidden;
	n_out = m->n_out;

	for (j = 0; j < GRU_MLP_MAX_HIDDEN; j++) {
		s64 v;

		if (j >= n_hidden)
			break;
		v = gru_mlp_dot((const struct gru_mlp_vec *)m->w1[j], x, n_in);
		v = gru_mlp_clamp((v >> f) + m->b1[j]);
		h.v[j] = v > 0 ? (s32)v : 0;
	}
	for (j = 0; j < GRU_MLP_MAX_CPUS; j++) {
		s64 v;

		if (j >= n_out)
			break;
		v = gru_mlp_dot((const struct gru_mlp_vec *)m->w2[j], &h, n_hidden);
		v = gru_mlp_clamp((v >> f) + m->b2[j]);
		out->v[j] = (s32)v;
		if (j == 0 || v > best) {
			best = v;
			best_cpu = (int)j;
		}
	}
	return best_cpu;
}

/*
 * One decision: the CPU (0 .. n_out - 1) the model picks for the task in raw, with its
 * features in x and its logits in out; or -enum gru_mlp_err if the model is missing or
 * malformed.
 */
static __always_inline int gru_mlp_decide(const struct gru_mlp_model *m,
					  const struct gru_mlp_raw *raw, struct gru_mlp_vec *x,
					  struct gru_mlp_logits *out)
{
	if (!m)
		return -GRU_MLP_ERR_NO_MODEL;
	gru_mlp_features(m->frac_bits, raw, x);
	return gru_mlp_infer(m, x, out);
}

#endif /* __GRU_MLP_BPF_H */
