#!/bin/sh
# A small classifier dataset recorded in the lab VM (qemu TCG, the sched_ext kernel), with the
# loads available in the cached xz-utils root filesystem: the background "idle" and
# "xz_compress" (the scenario catalogue's load), each
#   - with each foreground probe (game, office, web, audio) through the scenario runner
#     (`asa scenario run --record-features`), labels "<probe>+<load>", and
#   - with no probe at all (`asa record` next to a bare load loop), labels "<load>",
# under EEVDF and under bpfland. The agent's own VM test (agent/tests/vm_decision.rs) runs the
# same loads without a probe.
#
#   classifier/lab/collect-vm.sh OUT_DIR        (BIN=target/release, REPS, DURATION, TIMEOUT)
#
# Other loads: PROBES=office LOADS=archive_extract,zstd_compress,... NOPROBE=0
#   CPUS (default ASA_LAB_CPUS, else 2), MEMORY (MiB, default 2048): the guest's shape.
#   WORK_DISK (default `scenarios`, empty: none): the persistent work disk of lab/vm-run.sh.
#   ROOTFS=$(target/release/asa scenario packages all) (the no-probe part knows only idle and
#   xz_compress; ROOTFS = the packages the loads need, `all` shares the image of the full run).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
BIN=${BIN:-target/release}
REPS=${REPS:-2}
DURATION=${DURATION:-30}
NOPROBE_S=${NOPROBE_S:-40}
TIMEOUT=${TIMEOUT:-5400}
PROBES=${PROBES:-game,office,web,audio}
LOADS=${LOADS:-idle,xz_compress}
NOPROBE=${NOPROBE:-1}
ROOTFS=${ROOTFS:-xz-utils}
EXPERTS=${EXPERTS:-eevdf,bpfland}
MEMORY=${MEMORY:-2048}
CPUS=${CPUS:-${ASA_LAB_CPUS:-2}}
for b in asa asa-lab; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b missing: cargo build --release -p asa-agent -p asa-lab" >&2; exit 1; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SCEN=$(mktemp)
GUEST=$(mktemp)
trap 'rm -f "$SCEN" "$GUEST"' EXIT
# The built-in catalogue's probes and loads, with our own scenarios.
sed '/^\[\[scenario\]\]/,$d' "$HERE/../../scenarios/catalogue/scenarios.toml" > "$SCEN"
for probe in $(echo "$PROBES" | tr , ' '); do
  for load in $(echo "$LOADS" | tr , ' '); do
    if [ "$load" = idle ]; then spec='phase = [{ load = "idle", share = 1.0 }]'; else spec="load = \"$load\""; fi
    printf '[[scenario]]\nname = "D-%s-%s"\ntitle = "%s with %s"\nprobe = "%s"\n%s\n\n' \
      "$probe" "$load" "$probe" "$load" "$probe" "$spec" >> "$SCEN"
  done
done
{
  echo 'set -u'
  echo "cat > /tmp/scenarios.toml <<'SCENARIOS_EOF'"
  cat "$SCEN"
  echo 'SCENARIOS_EOF'
  cat <<EOF
W=/var/tmp/asa-work; D=/tmp/ds
mkdir -p \$W \$D/noprobe
start=\$(date +%s)
asa scenario run all --file /tmp/scenarios.toml --experts $EXPERTS --order by-expert \\
  --reps $REPS --duration $DURATION --settle 3 --cooldown 2 --keep-going --work-dir \$W \\
  --out /tmp/sc --record-features \$D/probe --record-interval-ms 1000 \\
  --machine-note "lab VM: qemu TCG (thread=${ASA_LAB_TCG_THREAD:-single}), $CPUS vCPUs, $MEMORY MiB"
echo "ASA-COLLECT: scenario runs exited \$? after \$((\$(date +%s) - start)) s"
# No probe: the bare loads. A text corpus like the catalogue's (8 MiB of real text).
i=0; while [ \$i -lt 400 ]; do cat /usr/share/common-licenses/*; i=\$((i+1)); done | head -c 8388608 > \$W/noprobe-corpus.txt
noprobe() {
  expert=\$1; rep=\$2
  asa record --label idle --out \$D/noprobe/idle-\$expert-r\$rep.parquet --duration $NOPROBE_S > /dev/null 2>&1
  echo "ASA-COLLECT: idle \$expert r\$rep \$?"
  setsid sh -c 'while :; do xz -T0 -3 --block-size=1MiB -c '\$W'/noprobe-corpus.txt > /dev/null; done' &
  L=\$!
  sleep 3
  asa record --label xz_compress --out \$D/noprobe/xz_compress-\$expert-r\$rep.parquet --duration $NOPROBE_S > /dev/null 2>&1
  echo "ASA-COLLECT: xz_compress \$expert r\$rep \$?"
  kill -TERM -\$L 2>/dev/null; sleep 1; pkill -x xz; sleep 2
}
if [ $NOPROBE = 1 ]; then
rep=1; while [ \$rep -le $REPS ]; do noprobe eevdf \$rep; rep=\$((rep+1)); done
asa pin bpfland > /tmp/pin.log 2>&1 &
P=\$!
asa status --wait-for bpfland --timeout 120 > /dev/null && {
  rep=1; while [ \$rep -le $REPS ]; do noprobe bpfland \$rep; rep=\$((rep+1)); done
}
kill -INT \$P; sleep 3
{
  echo 'schema = "asa.dataset"'
  echo 'version = 1'
  echo 'feature_schema = "asa.features"'
  # The version the recorder writes: the scenario runner's manifest names it.
  grep '^feature_schema_version' \$D/probe/manifest.toml || echo 'feature_schema_version = MISSING'
  echo 'machine = "lab VM: qemu TCG (thread=${ASA_LAB_TCG_THREAD:-single}), $CPUS vCPUs, $MEMORY MiB; no foreground probe"'
  for f in \$D/noprobe/*.parquet; do
    b=\$(basename \$f .parquet); load=\${b%%-*}; rest=\${b#*-}; expert=\${rest%%-*}
    printf '[[run]]\nname = "noprobe-%s"\nfile = "%s"\nlabel = "%s"\nscenario = "noprobe-%s"\nexpert = "%s"\n\n' \$b \$(basename \$f) \$load \$load \$expert
  done
} > \$D/noprobe/manifest.toml
fi
cp /tmp/sc/results.json \$D/probe/scenario-results.json 2>/dev/null
tar -C \$D -cf /lab/out/ds.tar .
echo "ASA-COLLECT: done after \$((\$(date +%s) - start)) s"
EOF
} > "$GUEST"
echo "collecting: {$PROBES} x {$LOADS} x {$EXPERTS} x $REPS reps of ${DURATION}s; no-probe runs: $NOPROBE" >&2
qemu-system-x86_64 --version | head -1 > "$OUT/qemu-version.txt"
started=$(date +%s)
set +e
GUEST_EXPERTS=$(echo "$EXPERTS" | tr , '\n' | grep -v '^eevdf$' | paste -sd, -)
WORK_DISK=${WORK_DISK-scenarios}
"$BIN/asa-lab" run --asa "$BIN/asa" ${GUEST_EXPERTS:+--expert "$GUEST_EXPERTS"} --rootfs "$ROOTFS" --memory "$MEMORY" --cpus "$CPUS" --timeout "$TIMEOUT" \
  ${WORK_DISK:+--work-disk "$WORK_DISK"} \
  --script "$GUEST" --out "$OUT/guest" 2> "$OUT/console.log"
rc=$?
set -e
echo "collect: VM exited $rc after $(( $(date +%s) - started )) s" | tee -a "$OUT/console.log" >&2
if [ -f "$OUT/guest/ds.tar" ]; then
  tar -C "$OUT" -xf "$OUT/guest/ds.tar" && rm -f "$OUT/guest/ds.tar"
fi
grep -a 'ASA-COLLECT\|asa-lab:' "$OUT/console.log" >&2 || true
exit $rc
