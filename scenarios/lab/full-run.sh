#!/bin/sh
# The full lab run (`make scenarios-full`): every scenario x every expert in ONE lab VM
# (qemu TCG, sched_ext kernel, Debian root filesystem with every load's tools), with feature
# recording, expert by expert (each expert pinned once: lavd takes ~30 s to attach under TCG).
# Brings back results.json, the report and the classifier dataset.
#
#   scenarios/lab/full-run.sh OUT_DIR
#
# Settings (environment): SCENARIOS (default all),
# EXPERTS (eevdf,lavd,bpfland,rusty,p2dq,flash,cosmos), DURATION / SETTLE / COOLDOWN (seconds per
# run), HOLD (seconds each expert runs before a run's load starts: `--hold`, default 30; by expert
# only the first run after each pin waits), REPS, ORDER (by-expert, or interleaved: `asa scenario
# run --order`), RECORD_INTERVAL_MS, RECORD_APPS (1: also every application's features,
# `--record-apps`, the default; 0: without), ORACLE_HINTS (1: the probe and each load in their
# labelled class's layer under scx_layered, `--oracle-hints`; default 0), MEMORY (MiB),
# TIMEOUT (s, the whole VM run), BIN (folder with asa, asa-lab, asa-scenarios),
# CATALOGUE (an expert catalogue file, e.g. experts/variants.toml: EXPERTS are its names, the
# guest's asa pins them from it; it is copied to OUT_DIR/experts.toml; default: the built-in one).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
SCENARIOS=${SCENARIOS:-all}
EXPERTS=${EXPERTS:-eevdf,lavd,bpfland,rusty,p2dq,flash,cosmos}
DURATION=${DURATION:-12}
SETTLE=${SETTLE:-2}
HOLD=${HOLD:-30}
COOLDOWN=${COOLDOWN:-1}
REPS=${REPS:-1}
ORDER=${ORDER:-by-expert}
RECORD_INTERVAL_MS=${RECORD_INTERVAL_MS:-1000}
RECORD_APPS=${RECORD_APPS:-1}
ORACLE_HINTS=${ORACLE_HINTS:-0}
MEMORY=${MEMORY:-4096}
TIMEOUT=${TIMEOUT:-9000}
BIN=${BIN:-target/release}
CATALOGUE=${CATALOGUE:-}

. lab/vm-run.sh
lab_prepare "$OUT" "$SCENARIOS" "$EXPERTS"
if [ -n "$CATALOGUE" ]; then
  # Checked on the host first (valid, and every name of EXPERTS in it): asa-lab installs the
  # experts' binaries from it, and the guest's asa checks the names again before the first run.
  known=$("$BIN/asa" --catalogue "$CATALOGUE" experts | awk 'NR > 1 {print $1}')
  for e in $(echo "$EXPERTS" | tr , ' '); do
    echo "$known" | grep -qx "$e" || { echo "expert $e is not in $CATALOGUE" >&2; exit 1; }
  done
  cp "$CATALOGUE" "$OUT/experts.toml"
  set -- --catalogue "$CATALOGUE"
  GUEST_ASA="asa --catalogue /lab/experts.toml"
else
  set --
  GUEST_ASA=asa
fi
lab_guest_script full run.log "$GUEST_ASA scenario run $SCENARIOS --experts $EXPERTS --order $ORDER \
  --reps $REPS --duration $DURATION --settle $SETTLE --hold $HOLD --cooldown $COOLDOWN --keep-going \
  --work-dir /var/tmp/asa-work --out /tmp/full --record-features /tmp/full/dataset \
  --record-interval-ms $RECORD_INTERVAL_MS$([ "$RECORD_APPS" = 1 ] && echo ' --record-apps')$([ "$ORACLE_HINTS" = 1 ] && echo ' --oracle-hints') --machine-note 'lab VM: qemu TCG (thread=${ASA_LAB_TCG_THREAD:-single}), ${ASA_LAB_CPUS:-2} vCPUs, $MEMORY MiB'"
echo "full run: $SCENARIOS x $EXPERTS, ${DURATION}s runs${CATALOGUE:+, experts from $CATALOGUE}; guest packages: $PACKAGES" >&2
rc=0
lab_run_vm full --memory "$MEMORY" --timeout "$TIMEOUT" "$@" || rc=$?
exit $rc
