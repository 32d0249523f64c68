# Shared by the long lab runs (scenarios/lab/full-run.sh, mapping/lab/live-run.sh,
# mapping/lab/overhead-run.sh) and the switch benches (lab/bench-switch-load.sh,
# lab/bench-switch-standby.sh, lab/standby-foreground-cost.sh): sourced, not executed.
#
#   BIN=target/release; . lab/vm-run.sh
#   lab_prepare OUT_DIR SCENARIOS EXPERTS  # checks $BIN; sets OUT (absolute), PACKAGES (the
#                                          # scenarios' guest packages), GUEST_EXPERTS (all but
#                                          # eevdf) and GUEST_SCRIPT (a temporary file)
#   lab_bench_prepare OUT_DIR              # for the benches: checks $BIN/asa and asa-lab; sets
#                                          # OUT (absolute) and SCRIPT (a temporary file)
#   lab_guest_script NAME LOG 'asa ... --out /tmp/NAME ...'
#                                          # writes GUEST_SCRIPT: runs the command with its output
#                                          # on the console and in /tmp/NAME/LOG, leaves /tmp/NAME
#                                          # as /lab/out/NAME.tar
#   lab_run_vm NAME [more `asa-lab run` arguments...]
#
# ROOTFS (default: the scenarios' packages) overrides the guest packages: e.g.
# ROOTFS=$(target/release/asa scenario packages all) shares the root filesystem, and so the
# work disk with its prepared inputs, with the other runs that use every package.
# WORK_DISK (default `scenarios`; empty: none) names the persistent work disk mounted at
# /var/tmp/asa-work (`asa-lab run --work-disk`): the loads' prepared inputs (kernel_build's
# tree: 10-15 min under TCG) are made by the first VM and reused by the next ones.
#
# lab_run_vm streams the guest's progress (lines of the asa runner and calibration, and lines
# starting with ASA-) to stderr while the whole console goes to OUT/console.log, unpacks
# OUT/guest/NAME.tar into OUT and returns the VM's exit status.

lab_bench_prepare() {
  for b in asa asa-lab; do
    [ -x "$BIN/$b" ] || {
      echo "$BIN/$b missing: cargo build --release -p asa-agent -p asa-lab" >&2
      return 1
    }
  done
  mkdir -p "$1"
  OUT=$(cd "$1" && pwd)
  SCRIPT=$(mktemp)
  trap 'rm -f "$SCRIPT"' EXIT
}

lab_prepare() {
  for b in asa asa-lab asa-scenarios; do
    [ -x "$BIN/$b" ] || {
      echo "$BIN/$b missing: cargo build --release -p asa-agent -p asa-lab -p asa-scenarios" >&2
      return 1
    }
  done
  PACKAGES=${ROOTFS:-$("$BIN/asa-scenarios" packages "$2")} || return 1
  GUEST_EXPERTS=$(echo "$3" | tr , '\n' | grep -v '^eevdf$' | paste -sd, -)
  mkdir -p "$1"
  OUT=$(cd "$1" && pwd)
  GUEST_SCRIPT=$(mktemp)
  trap 'rm -f "$GUEST_SCRIPT"' EXIT
}

lab_guest_script() {
  cat > "$GUEST_SCRIPT" <<SCRIPT
set -u
# Load inputs on the guest's disk (fio measures a real block device; the kernel tree is large).
mkdir -p /var/tmp/asa-work /tmp/$1
start=\$(date +%s)
{ $3 2>&1; echo \$? > /tmp/$1.rc; } | tee /tmp/$1.log
rc=\$(cat /tmp/$1.rc)
echo "ASA-RUN: $1 exited \$rc after \$((\$(date +%s) - start)) s"
df -h /var/tmp /tmp
cp /tmp/$1.log /tmp/$1/$2
tar -C /tmp/$1 -cf /lab/out/$1.tar .
exit \$rc
SCRIPT
}

lab_run_vm() {
  _name=$1
  shift
  _started=$(date +%s)
  _work_disk=${WORK_DISK-scenarios}
  rm -f "$OUT/.vm-rc"
  # The console (stderr of asa-lab) goes to console.log in full; progress lines also to stderr.
  { "$BIN/asa-lab" run --asa "$BIN/asa" ${GUEST_EXPERTS:+--expert "$GUEST_EXPERTS"} \
      --rootfs "$PACKAGES" \
      ${_work_disk:+--work-disk "$_work_disk"} \
      --script "$GUEST_SCRIPT" --out "$OUT/guest" "$@" 2>&1
    echo $? > "$OUT/.vm-rc"; } \
    | tee "$OUT/console.log" \
    | grep -a --line-buffered 'ASA-\|asa-lab:\|calibration scenario\|\] run [0-9]\|ERROR\|WARN' >&2
  _rc=$(cat "$OUT/.vm-rc" 2>/dev/null || echo 1)
  rm -f "$OUT/.vm-rc"
  echo "$_name: VM exited $_rc after $(( $(date +%s) - _started )) s (host wall time)" \
    | tee -a "$OUT/console.log" >&2
  if [ -f "$OUT/guest/$_name.tar" ]; then
    tar -C "$OUT" -xf "$OUT/guest/$_name.tar"
    rm -f "$OUT/guest/$_name.tar"
  fi
  return "$_rc"
}
