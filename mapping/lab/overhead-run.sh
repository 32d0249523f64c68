#!/bin/sh
# Calibration stage 2 (overhead) in ONE lab VM (qemu TCG, sched_ext kernel, Debian root
# filesystem with the scenarios' tools): `asa calibrate --stage overhead` on a prototype table of
# the lab machine. Every selected scenario runs under each expert of the pairs and under each
# pair A>B (starts under A, switches to B half way through the probe); the table gains the
# measured `[[switch]]` costs. Brings back the calibration folder (results.json, overhead.md,
# mapping.toml, calibrate.log).
#
#   mapping/lab/overhead-run.sh OUT_DIR TABLE
#
# Settings (environment): PAIRS (default: every ordered pair of EXPERTS), EXPERTS
# (eevdf,lavd,bpfland,rusty), SCENARIOS (S1,S10), DURATION / SETTLE / COOLDOWN (seconds), HOLD
# (seconds the first expert runs before each run's load starts: `--hold`, default 30), REPS,
# MEMORY (MiB; the table's machine fingerprint must match, the lab tables were made with 4096),
# TIMEOUT (s), BIN (folder with asa, asa-lab, asa-scenarios).
set -eu
OUT=${1:?usage: $0 OUT_DIR TABLE}
TABLE=${2:?usage: $0 OUT_DIR TABLE}
EXPERTS=${EXPERTS:-eevdf,lavd,bpfland,rusty}
SCENARIOS=${SCENARIOS:-S1,S10}
DURATION=${DURATION:-20}
SETTLE=${SETTLE:-2}
HOLD=${HOLD:-30}
COOLDOWN=${COOLDOWN:-1}
REPS=${REPS:-1}
MEMORY=${MEMORY:-4096}
TIMEOUT=${TIMEOUT:-7200}
BIN=${BIN:-target/release}
if [ -z "${PAIRS:-}" ]; then
  PAIRS=$(for a in $(echo "$EXPERTS" | tr , ' '); do
            for b in $(echo "$EXPERTS" | tr , ' '); do
              [ "$a" = "$b" ] || echo "$a>$b"
            done
          done | paste -sd, -)
fi

. lab/vm-run.sh
lab_prepare "$OUT" "$SCENARIOS" "$EXPERTS"
lab_guest_script overhead calibrate.log "asa calibrate --stage overhead --dir /tmp/overhead \
  --table /lab/table.toml --classes load --pairs '$PAIRS' --scenarios $SCENARIOS --reps $REPS \
  --duration $DURATION --settle $SETTLE --hold $HOLD --cooldown $COOLDOWN \
  --work-dir /var/tmp/asa-work"
echo "overhead run: $SCENARIOS x ($EXPERTS + $PAIRS), ${DURATION}s runs; guest packages: $PACKAGES" >&2
rc=0
lab_run_vm overhead --file "$TABLE:/lab/table.toml" --memory "$MEMORY" --timeout "$TIMEOUT" || rc=$?
exit $rc
