#!/bin/sh
# What scx_layered costs beside cosmos, in ONE lab VM: the office probe alone (idle load) and
# beside a kernel build (S10), under cosmos and scx_layered with ASA's default plan — the probe
# and the load in their labelled classes' layers (`--oracle-hints`) and, in a second pass, with no
# hints at all (every task in the last layer, `other`: one open layer) — interleaved, then one
# pass per scheduler with the kernel's BPF statistics on (`kernel.bpf_stats_enabled`), sampling
# the scheduler's programs' run time and run count from /proc/PID/fdinfo every 2 s.
#
#   layers/lab/cost-run.sh OUT_DIR
#
# Brings back hinted/ and unhinted/ (the scenario runner's results.json and report), stats/
# (results of the statistics pass) and bpf-stats.txt: lines `UNIX_TIME COMM RUN_TIME_NS RUN_CNT`,
# the sums over every BPF program the scheduler's process holds.
#
# Settings (environment): PASSES (default "hinted unhinted stats": which passes run), MONITOR
# (1: scx_layered's own statistics, `scx_layered --monitor 2`, beside every pass, in
# layered-monitor.txt; default 0), CENSUS (1: every thread's /proc stat and schedstat every 2 s
# beside every pass, in census.txt, for `asa_analysis.task_census`; default 0), TRACE (1: the
# kernel's sched_switch and sched_wakeup events through every pass, in trace.txt, with an
# `ASA-SYNC UNIX_TIME` marker, for `asa_analysis.wake_tails`; default 0), SCENARIOS (S10,O-idle: the catalogue's scenarios and O-idle,
# the office probe alone), EXPERTS (the hinted
# pass's, default cosmos,layered), CATALOGUE (an expert catalogue file EXPERTS come from, e.g.
# experts/layer-variants.toml; default: the built-in one), REPS (2), DURATION (30 s per run),
# HOLD (15 s each expert runs before a run's load starts), STATS_DURATION (30), MEMORY (MiB,
# 4096), TIMEOUT (s, 5400), BIN (target/release), ROOTFS (default: every scenario's packages).
# The guest's vCPUs: ASA_LAB_CPUS (default 2); ASA_LAB_TCG_THREAD=multi runs them on a host
# thread each (MTTCG).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
PASSES=${PASSES:-hinted unhinted stats}
MONITOR=${MONITOR:-0}
CENSUS=${CENSUS:-0}
TRACE=${TRACE:-0}
SCENARIOS=${SCENARIOS:-S10,O-idle}
EXPERTS=${EXPERTS:-cosmos,layered}
CATALOGUE=${CATALOGUE:-}
REPS=${REPS:-2}
DURATION=${DURATION:-30}
HOLD=${HOLD:-15}
STATS_DURATION=${STATS_DURATION:-30}
MEMORY=${MEMORY:-4096}
TIMEOUT=${TIMEOUT:-5400}
BIN=${BIN:-target/release}
HERE=$(cd "$(dirname "$0")" && pwd)

# The full catalogue's root filesystem: its work disk has the kernel tree S10 builds.
ROOTFS=${ROOTFS:-$("$BIN/asa" scenario packages all)}
. lab/vm-run.sh
lab_prepare "$OUT" S10 "eevdf,cosmos,layered,$EXPERTS"
if [ -n "$CATALOGUE" ]; then
  cp "$CATALOGUE" "$OUT/experts.toml"
  set -- --catalogue "$CATALOGUE"
  ASA="asa --catalogue /lab/experts.toml"
else
  set --
  ASA=asa
fi
SCEN=$(mktemp)
# The catalogue, and the office probe with no load.
cat "$HERE/../../scenarios/catalogue/scenarios.toml" > "$SCEN"
cat >> "$SCEN" <<'EOF'

[[scenario]]
name = "O-idle"
title = "Office File Editing alone"
probe = "office"
phase = [{ load = "idle", share = 1.0 }]
EOF
RUN="$ASA scenario run $SCENARIOS --file /tmp/scenarios.toml --order interleaved --settle 2 \
  --cooldown 1 --keep-going --work-dir /var/tmp/asa-work"
{
  echo 'set -u'
  echo "cat > /tmp/scenarios.toml <<'SCENARIOS_EOF'"
  cat "$SCEN"
  echo 'SCENARIOS_EOF'
  cat <<GUEST
mkdir -p /var/tmp/asa-work /tmp/cost
start=\$(date +%s)
# The sums of run time and run count over the BPF programs a scheduler process holds open.
bpf_sample() {
  while :; do
    for pid in \$(pidof scx_cosmos scx_layered); do
      set -- \$(cat /proc/\$pid/fdinfo/* 2>/dev/null | awk '/^run_time_ns:/ {t += \$2} /^run_cnt:/ {c += \$2} END {print t + 0, c + 0}')
      echo "\$(date +%s.%N) \$(cat /proc/\$pid/comm) \$1 \$2"
    done
    sleep 2
  done
}
# scx_layered's own statistics (per layer: preemptions and failed ones, local dispatches…).
layered_monitor() {
  while :; do
    pidof scx_layered > /dev/null && { echo "=== \$(date +%s)"; scx_layered --monitor 2 2>&1; }
    sleep 1
  done
}
# Every thread's stat and schedstat lines (path-prefixed), after a '=== UNIX_TIME' line.
census() {
  while :; do
    echo "=== \$(date +%s.%N)"
    grep -H '' /proc/[0-9]*/task/[0-9]*/stat /proc/[0-9]*/task/[0-9]*/schedstat 2>/dev/null
    sleep 2
  done
}
[ "$MONITOR" = 1 ] && { layered_monitor > /tmp/cost/layered-monitor.txt & }
[ "$CENSUS" = 1 ] && { census > /tmp/cost/census.txt & }
# Every context switch and wake-up, streamed; the marker ties the trace's clock (mono) to
# the runner's log (UTC).
trace_on() {
  T=/sys/kernel/tracing
  echo 0 > \$T/tracing_on; echo > \$T/trace
  echo mono > \$T/trace_clock
  echo 16384 > \$T/buffer_size_kb
  echo 1 > \$T/events/sched/sched_switch/enable
  echo 1 > \$T/events/sched/sched_wakeup/enable
  echo 1 > \$T/tracing_on
  cat \$T/trace_pipe > /tmp/cost/trace.txt & TRACE_PID=\$!
  echo "ASA-SYNC \$(date +%s.%N)" > \$T/trace_marker
}
[ "$TRACE" = 1 ] && trace_on
for pass in $PASSES; do
  case \$pass in
    hinted) $RUN --experts $EXPERTS --reps $REPS --duration $DURATION --hold $HOLD --oracle-hints \
      --out /tmp/cost/hinted 2>&1 | tee /tmp/cost/hinted.log ;;
    unhinted) $RUN --experts layered --reps $REPS --duration $DURATION --hold $HOLD \
      --out /tmp/cost/unhinted 2>&1 | tee /tmp/cost/unhinted.log ;;
    stats)
      sysctl -w kernel.bpf_stats_enabled=1
      bpf_sample > /tmp/cost/bpf-stats.txt & S=\$!
      $RUN --experts cosmos,layered --reps 1 --duration $STATS_DURATION --hold $HOLD --oracle-hints \
        --out /tmp/cost/stats 2>&1 | tee /tmp/cost/stats.log
      kill \$S
      sysctl -w kernel.bpf_stats_enabled=0 ;;
  esac
done
[ "$TRACE" = 1 ] && { echo 0 > /sys/kernel/tracing/tracing_on; sleep 1; kill \$TRACE_PID; }
echo "ASA-RUN: cost exited after \$((\$(date +%s) - start)) s"
tar -C /tmp/cost -cf /lab/out/cost.tar .
GUEST
} > "$GUEST_SCRIPT"
rm -f "$SCEN"
echo "cost run: $SCENARIOS x $EXPERTS; passes: $PASSES; $REPS reps" >&2
lab_run_vm cost --memory "$MEMORY" --timeout "$TIMEOUT" "$@"
