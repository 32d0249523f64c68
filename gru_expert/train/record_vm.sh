#!/bin/sh
# Records EEVDF placement traces in the lab VM (qemu TCG, Debian's sched_ext kernel) with the
# loads of record_host.sh, scaled to the guest's CPU count N (`nproc` in the guest): gru_record
# runs while one load at a time runs for $SECS seconds (default 45). Raw traces stay outside
# git; the guest's /lab/out (traces and logs) is copied to OUT_DIR.
# Usage (root, from the repository root, after
#   `cargo build --release -p asa-gru-expert -p asa-lab`):
#   CPUS=4 gru_expert/train/record_vm.sh /var/tmp/asa-in-kernel-model-4cpu
# LOADS (default all: cpu cpu1 switch io mixed compile xz sleepwake) picks some loads.
# CPUS (default 4) is the guest's vCPU count. The guest's root filesystem (ROOTFS, packages)
# has the loads' tools: gcc, make, stress-ng, xz (the host's stress-ng, copied in, lacks its
# shared libraries there). Under TCG the loads make far fewer events than on the host
# (2026-11-29: ~1 000 per 30 s of stress-ng --cpu 4), hence the longer default.
set -eu
out=${1:?usage: record_vm.sh OUT_DIR}
secs=${SECS:-45}
cpus=${CPUS:-4}
loads=${LOADS:-cpu cpu1 switch io mixed compile xz sleepwake}
bin=${BIN:-target/release}
rootfs=${ROOTFS:-gcc,make,stress-ng,xz-utils}
tools=$(mktemp -d)
script=$(mktemp)
trap 'rm -rf "$tools" "$script"' EXIT
strip -o "$tools/gru_record" "$bin/gru_record"
cat > "$script" <<SCRIPT
set -u
secs=$secs
loads=" $loads "
SCRIPT
cat "$(dirname "$0")/compile_project.sh" >> "$script"
cat >> "$script" <<'SCRIPT'
n=$(nproc)
h=$(( n / 2 )); [ $h -ge 1 ] || h=1
o=/lab/out
work=$(mktemp -d)
echo "guest: $(uname -r), $n CPUs, $secs s per load" | tee $o/guest.txt
compile_project "$work"
# (16 MiB, not the host's 64: TCG compresses ~30x slower and the loop only needs to keep going)
head -c 16M /dev/urandom | base64 > "$work/blob.txt"

run() { name=$1; shift
  case "$loads" in *" $name "*) ;; *) return 0 ;; esac
  gru_record --out $o/trace-$name.csv --duration $((secs + 2)) --label "vm ${n}cpu $name: $*" \
    > $o/rec-$name.log 2>&1 & R=$!
  sleep 1
  timeout "$secs" sh -c "$*" > $o/load-$name.log 2>&1 || true
  wait $R; echo "$name: $(tail -1 $o/rec-$name.log)"; }

run cpu "stress-ng --cpu $n --timeout ${secs}"
run cpu1 "stress-ng --cpu 1 --timeout ${secs}"
run switch "stress-ng --switch $n --switch-freq 2000 --timeout ${secs}"
run io "stress-ng --hdd $h --hdd-bytes 16M --io $h --temp-path $work --timeout ${secs}"
run mixed "stress-ng --cpu $h --switch $h --switch-freq 1000 --hdd $h --hdd-bytes 16M --temp-path $work --timeout ${secs}"
run compile "cd $work && while :; do make -s clean; make -s -j$n all; done"
run xz "while :; do xz -T$n -3 -c $work/blob.txt > /dev/null; done"
run sleepwake "for k in \$(seq 1 $((2 * n))); do (while :; do sleep 0.002; done) & done; wait"
rm -rf "$work"
SCRIPT
PATH="$tools:$PATH" "$bin/asa-lab" run --script "$script" --cpus "$cpus" --rootfs "$rootfs" \
  --tool gru_record --timeout $((10 * secs + 600)) --out "$out"
ls -la "$out"
# A load that never ran (a missing tool or library) leaves only the background's events.
if grep -l -e 'error while loading shared libraries' -e 'not found' -e 'fatal error' "$out"/load-*.log; then
  echo "record_vm.sh: a load did not run (the files above)" >&2
  exit 1
fi
