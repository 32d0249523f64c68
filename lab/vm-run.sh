# Shared by the long lab runs (scenarios/lab/full-run.sh, mapping/lab/live-run.sh,
# mapping/lab/overhead-run.sh): sourced, not executed. Each of those scripts writes a guest
# script that leaves its results as /lab/out/NAME.tar, then calls lab_run_vm.
#
#   BIN=target/release; . lab/vm-run.sh
#   lab_require_bins                       # asa, asa-lab, asa-scenarios built in $BIN
#   GUEST_EXPERTS=$(lab_guest_experts eevdf,lavd,bpfland)   # -> lavd,bpfland (EEVDF is built in)
#   lab_run_vm NAME OUT_DIR GUEST_SCRIPT [more `asa-lab run` arguments...]
#
# lab_run_vm streams the guest's progress (lines of the asa runner and calibration, and lines
# starting with ASA-) to stderr while the whole console goes to OUT_DIR/console.log, unpacks
# OUT_DIR/guest/NAME.tar into OUT_DIR and returns the VM's exit status.

lab_require_bins() {
  for b in asa asa-lab asa-scenarios; do
    [ -x "$BIN/$b" ] || {
      echo "$BIN/$b missing: cargo build --release -p asa-agent -p asa-lab -p asa-scenarios" >&2
      return 1
    }
  done
}

lab_guest_experts() {
  echo "$1" | tr , '\n' | grep -v '^eevdf$' | paste -sd, -
}

lab_run_vm() {
  _name=$1 _out=$2 _script=$3
  shift 3
  _started=$(date +%s)
  rm -f "$_out/.vm-rc"
  # The console (stderr of asa-lab) goes to console.log in full; progress lines also to stderr.
  { "$BIN/asa-lab" run --asa "$BIN/asa" --script "$_script" --out "$_out/guest" "$@" 2>&1
    echo $? > "$_out/.vm-rc"; } \
    | tee "$_out/console.log" \
    | grep -a --line-buffered 'ASA-\|asa-lab:\|calibration scenario\|\] run [0-9]\|ERROR\|WARN' >&2
  _rc=$(cat "$_out/.vm-rc" 2>/dev/null || echo 1)
  rm -f "$_out/.vm-rc"
  echo "$_name: VM exited $_rc after $(( $(date +%s) - _started )) s (host wall time)" \
    | tee -a "$_out/console.log" >&2
  if [ -f "$_out/guest/$_name.tar" ]; then
    tar -C "$_out" -xf "$_out/guest/$_name.tar"
    rm -f "$_out/guest/$_name.tar"
  fi
  return "$_rc"
}
