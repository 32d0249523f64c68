/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Layout shared by perception.bpf.c and agent/src/perception/bpf.rs (which
 * mirrors it as `RawCounters`; keep both in sync: 9 u64 then the histogram).
 */
#ifndef ASA_PERCEPTION_H
#define ASA_PERCEPTION_H

/* log2 buckets of nanoseconds: bucket i holds [2^i, 2^(i+1)) ns, bucket 0 also 0..1 ns;
 * the last bucket (2^31 ns, about 2.1 s) also holds everything longer. Power of two. */
#define PERCEPTION_LATENCY_BUCKETS 32

struct perception_counters {
	u64 switches;
	u64 voluntary;
	u64 involuntary;
	u64 migrations;
	u64 wakeups;
	u64 wakeups_new;
	u64 runq_wait_ns;
	u64 runq_waits;
	u64 wakeup_latency_count;
	u64 wakeup_latency_hist[PERCEPTION_LATENCY_BUCKETS];
};

#endif
