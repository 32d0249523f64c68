#!/bin/sh
# Calibration stage 3 (live) in ONE lab VM (qemu TCG, sched_ext kernel, Debian root filesystem
# with the scenarios' tools): `asa calibrate --stage live` with the given mapping table and
# classifier model, every selected scenario under each static expert, `asa run --dry-run` and
# `asa run`. Brings back the calibration folder (results.json, live.md, live.json, mapping.toml,
# the agent's decision logs).
#
#   mapping/lab/live-run.sh OUT_DIR TABLE MODEL
#
# Settings (environment): SCENARIOS (default P1,P2,P3,P4,S1,S10,S19,S25), EXPERTS
# (eevdf,lavd,bpfland,rusty), CLASSES (load), DURATION / MIN_PHASE / SETTLE / COOLDOWN (seconds;
# MIN_PHASE lengthens a phased scenario so its shortest phase lasts that long), HOLD (seconds the
# scheduler under test runs before each run's load starts, every column alike: `--hold`, default
# 30; adds up to HOLD to each run), REPS,
# AGENT_COOLDOWN (s), AGENT_INTERVAL_MS (the agent's tick; default asa run's own), AGENT_NICE (the
# agent's decision thread; default asa run's own), AGENT_NO_BPF (1: the
# agent perceives without its BPF scheduler counters; default 0), AGENT_STANDBY (the agent's hot
# standbys, ASA_STANDBY: 0 for none; default asa run's own), EXPERT_NICE (the
# experts' processes, static runs and the agent's alike: ASA_EXPERT_NICE, default asa's), MEMORY
# (MiB), TIMEOUT (s), BIN (folder with asa, asa-lab, asa-scenarios), DRY_RUN (1: also the
# `asa run --dry-run` column, the default; 0: without it), APP_MODEL (an application model for
# the agent's per-application mode, ASA_APP_MODEL in the guest; default: none), BASELINE (the
# expert the verdicts compare with, one of EXPERTS; default: asa calibrate's, eevdf).
set -eu
OUT=${1:?usage: $0 OUT_DIR TABLE MODEL}
TABLE=${2:?usage: $0 OUT_DIR TABLE MODEL}
MODEL=${3:?usage: $0 OUT_DIR TABLE MODEL}
SCENARIOS=${SCENARIOS:-P1,P2,P3,P4,S1,S10,S19,S25}
EXPERTS=${EXPERTS:-eevdf,lavd,bpfland,rusty}
CLASSES=${CLASSES:-load}
DURATION=${DURATION:-20}
MIN_PHASE=${MIN_PHASE:-0}
SETTLE=${SETTLE:-2}
HOLD=${HOLD:-30}
COOLDOWN=${COOLDOWN:-1}
REPS=${REPS:-1}
AGENT_COOLDOWN=${AGENT_COOLDOWN:-6}
AGENT_INTERVAL_MS=${AGENT_INTERVAL_MS:-}
AGENT_NICE=${AGENT_NICE:-}
AGENT_NO_BPF=${AGENT_NO_BPF:-0}
EXPERT_NICE=${EXPERT_NICE:-}
AGENT_STANDBY=${AGENT_STANDBY:-}
MEMORY=${MEMORY:-4096}
TIMEOUT=${TIMEOUT:-7200}
BIN=${BIN:-target/release}
DRY_RUN=${DRY_RUN:-1}
APP_MODEL=${APP_MODEL:-}
BASELINE=${BASELINE:-}

. lab/vm-run.sh
ORT=$(gru_expert/setup_ort.sh)
lab_prepare "$OUT" "$SCENARIOS" "$EXPERTS"
# The agent switches to whatever the table ranks: install those experts too, not only the
# static ones (EXPERTS=eevdf alone would leave the agent nothing to switch to).
GUEST_EXPERTS=$( { echo "$GUEST_EXPERTS" | tr , '\n'
  grep -o 'expert *= *"[a-z_]*"' "$TABLE" | sed 's/.*"\([a-z_]*\)"/\1/'; } | grep -v '^eevdf$' | grep . | sort -u | paste -sd, -)
lab_guest_script live calibrate.log "${EXPERT_NICE:+ASA_EXPERT_NICE=$EXPERT_NICE }${AGENT_STANDBY:+ASA_STANDBY=$AGENT_STANDBY }${APP_MODEL:+ASA_APP_MODEL=/lab/app-model.onnx }asa calibrate --stage live --dir /tmp/live \
  --table /lab/table.toml --model /lab/model.onnx --onnxruntime /lab/libonnxruntime.so \
  --agent-cooldown-s $AGENT_COOLDOWN ${AGENT_INTERVAL_MS:+--agent-interval-ms $AGENT_INTERVAL_MS }${AGENT_NICE:+--agent-nice $AGENT_NICE }--classes $CLASSES --scenarios $SCENARIOS --experts $EXPERTS ${BASELINE:+--baseline $BASELINE }\
  --reps $REPS --duration $DURATION --min-phase $MIN_PHASE --settle $SETTLE --hold $HOLD --cooldown $COOLDOWN --work-dir /var/tmp/asa-work$([ "$DRY_RUN" = 0 ] && echo ' --no-dry-run')$([ "$AGENT_NO_BPF" = 1 ] && echo ' --agent-no-bpf')"
echo "live run: $SCENARIOS x $EXPERTS + asa run, ${DURATION}s runs; guest packages: $PACKAGES" >&2
rc=0
[ -n "$APP_MODEL" ] && set -- --file "$APP_MODEL:/lab/app-model.onnx" || set --
lab_run_vm live "$@" --file "$TABLE:/lab/table.toml" --file "$MODEL:/lab/model.onnx" \
  --file "$ORT:/lab/libonnxruntime.so" --memory "$MEMORY" --timeout "$TIMEOUT" || rc=$?
exit $rc
