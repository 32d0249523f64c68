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
# run), REPS, RECORD_INTERVAL_MS, MEMORY (MiB),
# TIMEOUT (s, the whole VM run), BIN (folder with asa, asa-lab, asa-scenarios).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
SCENARIOS=${SCENARIOS:-all}
EXPERTS=${EXPERTS:-eevdf,lavd,bpfland,rusty,p2dq,flash,cosmos}
DURATION=${DURATION:-12}
SETTLE=${SETTLE:-2}
COOLDOWN=${COOLDOWN:-1}
REPS=${REPS:-1}
RECORD_INTERVAL_MS=${RECORD_INTERVAL_MS:-1000}
MEMORY=${MEMORY:-4096}
TIMEOUT=${TIMEOUT:-9000}
BIN=${BIN:-target/release}

. lab/vm-run.sh
lab_prepare "$OUT" "$SCENARIOS" "$EXPERTS"
lab_guest_script full run.log "asa scenario run $SCENARIOS --experts $EXPERTS --order by-expert \
  --reps $REPS --duration $DURATION --settle $SETTLE --cooldown $COOLDOWN --keep-going \
  --work-dir /var/tmp/asa-work --out /tmp/full --record-features /tmp/full/dataset \
  --record-interval-ms $RECORD_INTERVAL_MS --machine-note 'lab VM: qemu TCG (thread=single), 2 vCPUs, $MEMORY MiB'"
echo "full run: $SCENARIOS x $EXPERTS, ${DURATION}s runs; guest packages: $PACKAGES" >&2
rc=0
lab_run_vm full --memory "$MEMORY" --timeout "$TIMEOUT" || rc=$?
exit $rc
