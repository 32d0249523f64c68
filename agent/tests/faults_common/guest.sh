# The fault-injection suite's guest script (tests/vm_faults.rs; records: faults_common/mod.rs).
# One `asa run`, one fault after the other. Each row: `row NAME FAULT`, its set-up, `ready`
# (a known state, the status before), `inject` and the fault, `settle` (poll every 50 ms
# until the kernel and the agent agree on a known scheduler), `finish` (orphans, a timed
# status). The test fills in the words between at-signs: the `asa run` arguments of the model,
# mapping and ONNX Runtime, the ops_of function (from the catalogue), the mapping's cut.
set -u
export ASA_CATALOGUE=/lab/faults-catalogue.toml
DECIDE_ARGS="@ARGS@"
DLOG=/run/asa-dlog
OUT=/lab/out
ROW=suite
now() { date +%s.%N; }
rec() { echo "$1=$2" >> $OUT/results; }
put() { echo "$ROW $1 ${2:-}" >> $OUT/faults; }
note() { put note "$*"; }
state() { cat /sys/kernel/sched_ext/state; }
ops() { cat /sys/kernel/sched_ext/root/ops 2>/dev/null; }
seq_now() { cat /sys/kernel/sched_ext/enable_seq; }
elapsed() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
# ops_of NAME: the ops prefix of catalogue expert NAME ("" for the kernel default, ? unknown).
@OPS_OF@
# st FILE: `asa status --json` into FILE, at most 2 s.
st() { timeout 2 asa status --json > "$1" 2>/dev/null; }
# The agent's active expert and its pid in a saved status ("active" is the first object
# with those keys in the pretty JSON).
active_of() { awk '/"active": \{/ {a=1} a && /"expert":/ {sub(/.*"expert": "/, ""); sub(/".*/, ""); print; exit}' "$1" 2>/dev/null; }
active_pid_of() { awk '/"active": \{/ {a=1} a && /"pid":/ {sub(/.*"pid": /, ""); sub(/,.*/, ""); print; exit}' "$1" 2>/dev/null; }
proc_state() { awk '{print $3}' /proc/$1/stat 2>/dev/null; }
# ms_as_s KEY FILE: the first number in milliseconds named KEY in a saved status, in seconds, or
# nothing when the answer has no such key.
ms_as_s() { awk -v key="\"$1\": " 'index($0, key) && $0 ~ /: [0-9]/ {sub(/.*: /, ""); sub(/,.*/, ""); printf "%.3f", $0 / 1000; exit}' "$2" 2>/dev/null; }
# The moment a saved status describes: when the agent read the kernel for it (s since the epoch).
answered_of() { ms_as_s kernel_read_unix_ms "$1"; }
# known FILE: the agent answered and says it is consistent, the kernel (read now) runs what it
# names, and the agent's expert process, if any, lives (a killed one is a zombie until the
# agent reaps it; a stopped one counts: its BPF part still schedules).
known() {
  grep -q '"consistent": true' "$1" || return 1
  a=$(active_of "$1"); p=$(active_pid_of "$1"); want=$(ops_of "$a")
  case "$want" in
    '?') return 1 ;;
    '') [ "$(state)" = disabled ] || return 1 ;;
    *) [ "$(state)" = enabled ] || return 1
       case "$(ops)" in "$want"*) ;; *) return 1 ;; esac ;;
  esac
  case "$p" in ''|null) return 0 ;; esac
  case "$(proc_state $p)" in ''|Z|X) return 1 ;; esac
}
# The agent: started in the background, its pid in D (experts are its children).
start_agent() { asa run $DECIDE_ARGS --decision-log $DLOG/decisions.jsonl >> $OUT/daemon.log 2>&1 & D=$!; echo "=== agent pid $D" >> $OUT/daemon.log; }
agent_alive() { s=$(proc_state $D); [ -n "$s" ] && [ "$s" != Z ]; }
# wait_agent S: until an agent answers as the daemon, at most S s.
wait_agent() {
  i=0; while [ $i -lt $(( $1 * 10 )) ]; do
    st /tmp/w.json && grep -q '"mode": "daemon"' /tmp/w.json && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}
ensure_agent() { agent_alive && return 0; note "$1"; start_agent; wait_agent 60 || note "the new agent did not answer within 60 s"; }
# Every scx_* process as PID/PPID/STATE/COMM, and the pids of those whose parent is not $1.
# Kernel threads (children of kthreadd, pid 2: sched_ext's own scx_enable_helper) are no expert.
scx_procs() { ps -eo pid=,ppid=,stat=,comm= | awk '$4 ~ /^scx_/ && $2 != 2 {printf "%s/%s/%s/%s ", $1, $2, substr($3, 1, 1), $4}'; }
not_children_of() { ps -eo pid=,ppid=,comm= | awk -v d="$1" '$3 ~ /^scx_/ && $2 != d && $2 != 2 {printf "%s ", $1}'; }

row() { ROW=$1; shift; put fault "$*"; echo "=== $ROW: $*"; }
# ready: wait (up to 20 s, not counted) for a known state; the status before the fault.
ready() {
  i=0; while [ $i -lt 40 ]; do st /tmp/pre.json && known /tmp/pre.json && break; sleep 0.5; i=$((i + 1)); done
  [ $i -ge 40 ] && note "no known scheduler before the fault (waited 20 s)"
  st $OUT/$ROW.before.json; put t_before $(now)
}
inject() { T_INJECT=$(now); put t_inject $T_INJECT; }
# settle [S]: poll every 50 ms (at most S s, default 10) until `known`; the agreeing answer (else
# the last one) is kept as ROW.known.json, every poll in ROW.polls.
settle() {
  max=${1:-10}; put poll_s $max; t_end=$(( $(date +%s) + max ))
  while :; do
    st /tmp/poll.json; rc=$?; t=$(now)
    if [ $rc = 0 ] && known /tmp/poll.json; then
      put t_known $t; cp /tmp/poll.json $OUT/$ROW.known.json
      a=$(answered_of /tmp/poll.json); [ -n "$a" ] && put t_answer $a
      echo "$t known kernel=$(state)/$(ops) agent=$(active_of /tmp/poll.json)" >> $OUT/$ROW.polls
      return 0
    fi
    echo "$t rc=$rc kernel=$(state)/$(ops) agent=$(active_of /tmp/poll.json)/$(active_pid_of /tmp/poll.json)" >> $OUT/$ROW.polls
    if [ $(date +%s) -ge $t_end ]; then put t_known none; cp /tmp/poll.json $OUT/$ROW.known.json; return 1; fi
    sleep 0.05
  done
}
# finish [WATCH_S]: WATCH_S more seconds (default 2), up to 5 s for scx_* processes that are
# not the live agent's children to go, the scx_* processes left, a timed `asa status`.
finish() {
  sleep ${1:-2}
  alive=$D; agent_alive || alive=none
  t0=$(now); i=0
  while [ -n "$(not_children_of $alive)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  put orphan_wait_s $(elapsed $t0 $(now))
  put agent_pid $alive
  put procs "$(scx_procs)"
  t0=$(now); put t_final_start $t0
  timeout 5 asa status --json > $OUT/$ROW.final.json 2>/dev/null; rc=$?
  put t_final_end $(now); put final_rc $rc
}
# kill_active SIGNAL: signal the expert the agent names active (status before the fault).
kill_active() {
  X=$(active_pid_of $OUT/$ROW.before.json)
  case "$X" in ''|null) note "no expert process to signal"; inject; return 1 ;; esac
  inject; kill -$1 $X
}
# pin EXPERT: through the agent only (without one, `asa pin` would supervise in the foreground
# until Ctrl-C); a failure is noted.
pin() {
  agent_alive || { note "no agent to pin $1 through"; return 1; }
  timeout 120 asa pin "$1" > /tmp/pin.out 2>&1; rc=$?
  [ $rc = 0 ] || note "asa pin $1: exit $rc, $(tr '\n' ' ' < /tmp/pin.out | cut -c1-160)"
  return $rc
}
# refuse_check FILE: a new agent (a dry run) given the files as they are now, FILE damaged.
refuse_check() {
  put refuse_file "$1"
  timeout 60 asa run --dry-run --no-bpf --duration-s 2 $DECIDE_ARGS > $OUT/$ROW.refuse.out 2>&1
  put refuse_rc $?
  put refuse_msg "$(grep -m1 'asa: error' $OUT/$ROW.refuse.out | cut -c1-240)"
}

rec t_start $(now)
mkdir -p $DLOG && mount -t tmpfs -o size=4m tmpfs $DLOG
chmod +x /usr/local/bin/scx_flaky
mkdir -p /lab/orig && cp /lab/classifier.onnx /lab/mapping.toml /lab/orig/
# What the kernel offers about its watchdog (no timeout file is known; bpfland sets 5 s).
rec scx_sysfs "$(cd /sys/kernel/sched_ext && find . | tr '\n' ' ')"
rec rusty_installed $(command -v scx_rusty > /dev/null && echo 1 || echo 0)
start_agent
wait_agent 90; rec agent_up $?
rec t_agent_up $(now)

row expert_sigkill "expert SIGKILL (scx_bpfland, the agent's own choice)"
asa status --wait-for bpfland --timeout 40 > /dev/null 2>&1 || { note "the agent had not chosen bpfland within 40 s: pinned it"; pin bpfland; }
ready; kill_active KILL; settle; finish

row expert_sigabrt "expert SIGABRT (scx_bpfland, pinned)"
pin bpfland; ready; kill_active ABRT; settle; finish

row expert_sigstop "expert SIGSTOP (scx_bpfland, pinned), then 7 s for the kernel's watchdog (bpfland's timeout_ms: 5 s)"
pin bpfland; ready; seq0=$(seq_now)
kill_active STOP; X_STOPPED=$X; settle
t_watch=$(( $(date +%s) + 7 )); ej=
while [ $(date +%s) -lt $t_watch ]; do
  if [ "$(state)" != enabled ] || [ "$(seq_now)" != "$seq0" ]; then ej=$(now); break; fi
  sleep 0.05
done
if [ -n "$ej" ]; then
  put t_event $ej
  note "the kernel ejected it (state $(state), enable_seq $seq0 -> $(seq_now))"
  settle
else
  note "not ejected within 7 s: state $(state), ops $(ops), enable_seq $seq0 -> $(seq_now); the process is in state $(proc_state $X_STOPPED) (bpfland schedules in BPF, its stopped process stalls no task)"
fi
finish 0

row stopped_expert_switched_away "a switch away from the SIGSTOPped expert (asa pin eevdf)"
note "the stopped expert: pid $X_STOPPED, state $(proc_state $X_STOPPED)"
ready; inject; pin eevdf; settle; finish
note "the stopped expert afterwards: $( [ -n "$(proc_state $X_STOPPED)" ] && echo "still there, state $(proc_state $X_STOPPED)" || echo gone)"

row sysrq_s "SysRq-S: the kernel ejects scx_bpfland (pinned)"
pin bpfland; ready; inject; echo S > /proc/sysrq-trigger; settle; finish 3

row expert_exits_1s_after_attach "an expert that exits 1 s after attaching (catalogue entry flaky: scx_bpfland under a wrapper that SIGKILLs it)"
rm -f /lab/flaky_killed_at
ready; inject
pin flaky
i=0; while [ ! -s /lab/flaky_killed_at ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
if [ -s /lab/flaky_killed_at ]; then put t_event $(cat /lab/flaky_killed_at); else note "the wrapper had not killed its expert 5 s after the pin"; fi
settle; finish

row agent_sigkill_mid_switch "agent SIGKILLed mid-switch (bpfland -> rusty, rusty loading behind its attach gate), restarted at once"
pin bpfland; ready
timeout 120 asa pin rusty > $OUT/$ROW.pin.out 2>&1 &
P=$!
i=0; while [ $i -lt 200 ]; do
  st /tmp/sw.json; grep -q '"switching_to": "rusty"' /tmp/sw.json && pidof scx_rusty > /dev/null && break
  sleep 0.05; i=$((i + 1))
done
[ $i -ge 200 ] && note "the switch to rusty was not seen in progress within 10 s"
sleep 0.3
note "killed agent $D while rusty (pid $(pidof scx_rusty)) loaded and bpfland (pid $(pidof scx_bpfland)) ran"
inject; kill -KILL $D
start_agent
settle 15
# How long the kernel alone took (the old expert detaching on its parent-death SIGINT).
t_k=$(awk '/kernel=disabled\// {print $1; exit}' $OUT/$ROW.polls)
# The kernel's part is the dying expert's and the emulator's (0.1-2.4 s under TCG), not the new
# agent's: the row's bound counts from it.
[ -n "$t_k" ] && { note "the kernel was on EEVDF $(elapsed $T_INJECT $t_k) s after the kill (first poll that saw it)"; put t_event $t_k; }
wait $P; note "the interrupted asa pin rusty: exit $? ($(tr '\n' ' ' < $OUT/$ROW.pin.out | cut -c1-120))"
finish
# What this row leaves would disturb the next ones: killed after it was recorded.
left=$(not_children_of $D)
[ -n "$left" ] && { note "killed what was left after the row: $(scx_procs)"; kill -KILL $left; }
# The new agent answered while starting (mode starting); the next rows damage the model and
# the mapping it is loading: it must be up first.
wait_agent 60 || note "the new agent was not up (mode daemon) 60 s after the row"

# damage_row ROW DESCRIPTION FILE DAMAGE...: the agent runs while DAMAGE (a command) damages FILE;
# the agent must go on with what it loaded, and a new agent must refuse the file. FILE is then
# restored from /lab/orig.
damage_row() {
  row "$1" "$2"; f=$3; shift 3
  ready; inject
  "$@"
  settle; sleep 3; refuse_check $f
  cp /lab/orig/$(basename $f) $f; finish 0
}
garbage() { head -c $2 /dev/urandom > $1.new && mv $1.new $1; }
halve() { truncate -s $(( $(stat -c %s $1) / 2 )) $1; }

damage_row model_replaced_garbage "the model file replaced with garbage while the agent runs (a new file renamed over it)" \
  /lab/classifier.onnx garbage /lab/classifier.onnx 65536
damage_row model_truncated "the model file truncated to half its size in place while the agent runs" \
  /lab/classifier.onnx halve /lab/classifier.onnx
damage_row mapping_replaced_garbage "the mapping file replaced with garbage while the agent runs (a new file renamed over it)" \
  /lab/mapping.toml garbage /lab/mapping.toml 4096
damage_row mapping_truncated "the mapping file truncated in place while the agent runs (cut inside an expert's name)" \
  /lab/mapping.toml truncate -s @MAPPING_CUT@ /lab/mapping.toml

row decision_log_disk_full "the decision log's file system full (its 4 MiB tmpfs filled with dd)"
ready; inject
dd if=/dev/zero of=$DLOG/fill bs=64k > /dev/null 2>&1
note "filled: $(df -k $DLOG | awk 'NR == 2 {print $4}') KiB left"
settle; finish 5
rm -f $DLOG/fill
ensure_agent "the agent had exited by the end of the row: a new one started for the next"

row control_socket_flood "the control socket flooded: 64 clients that say nothing, a 64 MiB request line, 200 malformed requests"
ready; inject
perl /lab/flood.pl 64 6 > $OUT/$ROW.flood.out 2>&1 &
FLOOD=$!
settle
sleep 1
t0=$(now); timeout 5 asa status --json > $OUT/$ROW.during.json 2>/dev/null; rc=$?; t1=$(now)
# The agent's answer time (connect to answer, as the client measured it): the status process's
# own start-up under TCG (0.3-0.7 s, more beside the flood's writers) is the guest's, not the
# agent's; the whole process's time goes into a note.
if [ $rc = 0 ] && grep -q '"mode": "daemon"' $OUT/$ROW.during.json; then
  put during_status_s $(ms_as_s answered_in_ms $OUT/$ROW.during.json)
  note "the status process during the flood took $(elapsed $t0 $t1) s in all"
else put during_status_s none; fi
wait $FLOOD; note "flood: $(tr '\n' ' ' < $OUT/$ROW.flood.out | cut -c1-240)"
finish

ROW=suite
rec t_rows_done $(now)
if agent_alive; then kill -TERM $D; wait $D; rec agent_exit $?; else rec agent_exit gone; fi
rec final_state $(state)
rec scx_left "$(scx_procs)"
cp $DLOG/decisions.jsonl $OUT/ 2>/dev/null
rec t_end $(now)
exit 0
