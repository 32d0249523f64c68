//! Issue 32 in the lab VM (Debian's sched_ext kernel under qemu, the Debian test root
//! filesystem), with the real agent and scx_bpfland:
//! - a scheduler another tool attached before `asa run` starts is waited for (status mode
//!   `waiting`, pins refused, no exit), and the agent takes control when it goes; with
//!   `--take-over` the agent asks its owner to stop (SIGINT) and takes control;
//! - an expert the kernel ejects whenever it attaches (SysRq-S in a loop) is quarantined with
//!   a doubling back-off: the issue asks for at most 3 attaches in 120 s with the defaults
//!   (15 s cooldown, 60 s first quarantine); to keep the VM time short the test divides every
//!   time by 3 (5 s cooldown, 20 s first quarantine) and allows at most 3 attaches in 40 s
//!   (without the quarantine the agent would attach about every 6 s: 6 or 7 times);
//! - that run happens inside the unit's sandbox as far as it can be built without systemd in
//!   the guest: the unit's capability bounding set and no_new_privs (`setpriv`), its
//!   `LimitMEMLOCK`, and a private mount namespace with ProtectSystem=strict (every mount
//!   read-only but the unit's writable directories /run/asa, /run/scx_gru, /var/log/asa),
//!   ProtectHome, PrivateTmp, PrivateDevices (a /dev with only the basic nodes) and
//!   ProtectKernelTunables (/sys, /proc/sys, /proc/sysrq-trigger read-only), and
//!   MemoryDenyWriteExecute as the kernel's PR_SET_MDWE, and the unit's system-call filters
//!   (SystemCallFilter=~…, SystemCallErrorNumber, RestrictAddressFamilies,
//!   SystemCallArchitectures) as the seccomp program systemd would build (`sandbox_common`,
//!   loaded by `data/seccomp/seccomp-exec.pl`; the same program is loaded on the host by
//!   `the_units_system_call_filter_denies_its_groups_and_families`);
//! - an agent killed with SIGKILL while the expert it started behind the attach gate runs
//!   leaves no scheduler behind: the expert holds no seccomp listener (only the agent does),
//!   gets its parent-death SIGINT, exits, and the kernel is back on EEVDF within 2 s.

mod daemon_common;
mod sandbox_common;

use std::time::Duration;

use asa_agent::decision::engine::TickRecord;
use asa_lab::Lab;
use daemon_common::{asa_run_guest, loop_test_model_classes, mapping_table, GUEST_RUN_ARGS};
use sandbox_common::{unit_setting, write_unit_filter, UnitFilter};
use serde_json::Value;

/// The directories the unit makes writable (RuntimeDirectory=, LogsDirectory=), as paths.
fn writable_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    for (key, base) in [
        ("RuntimeDirectory=", "/run"),
        ("LogsDirectory=", "/var/log"),
    ] {
        let names = unit_setting(key).unwrap();
        dirs.extend(names.split_whitespace().map(|n| format!("{base}/{n}")));
    }
    dirs
}

/// The unit's CapabilityBoundingSet (agent/dist/asa.service), as setpriv takes it:
/// `-all,+sys_admin,+bpf,...`.
fn bounding_set() -> String {
    let caps = unit_setting("CapabilityBoundingSet=").unwrap();
    let mut set = String::from("-all");
    for cap in caps.split_whitespace() {
        let name = cap.strip_prefix("CAP_").expect("CAP_ names");
        set.push_str(&format!(",+{}", name.to_lowercase()));
    }
    set
}

/// Where the unit's system-call filter goes in the guest: /lab/seccomp.bpf and its installer,
/// /lab/seccomp-exec.pl.
struct Sandbox;

fn lab_run(
    name: &str,
    script: &str,
    mapping_expert: &'static str,
    sandbox: Option<Sandbox>,
) -> (asa_lab::VmOutcome, String) {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        mapping_table(&loop_test_model_classes(), |_| mapping_expert),
    )
    .unwrap();
    let mut files = Vec::new();
    if let Some(Sandbox) = sandbox {
        let [bpf, pl] = write_unit_filter(dir.path());
        files.push((bpf, "/lab/seccomp.bpf".into()));
        files.push((pl, "/lab/seccomp-exec.pl".into()));
    }
    let script = script.replace("{args}", GUEST_RUN_ARGS);
    let mut run = asa_run_guest(name, &script, &mapping, &["bpfland"], files);
    run.vm.timeout = Duration::from_secs(420);
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(&run).expect("the lab VM ran");
    let console = out.script_output().to_string();
    (out, console)
}

#[test]
fn the_units_system_call_filter_denies_its_groups_and_families() {
    let filter = UnitFilter::from_host();
    let denies = |name: &str| filter.denied.values().any(|n| n == name);
    for name in [
        "mount",
        "umount2",
        "settimeofday",
        "init_module",
        "reboot",
        "swapon",
        "afs_syscall",
    ] {
        assert!(
            denies(name),
            "{name} is in a denied group: {:?}",
            filter.denied
        );
    }
    // What the agent and the experts need stays.
    for name in [
        "bpf",
        "perf_event_open",
        "pidfd_getfd",
        "seccomp",
        "ioctl",
        "execve",
    ] {
        assert!(!denies(name), "{name} must stay allowed");
    }
    // Loaded for real on the host, as the guest loads it.
    let dir = tempfile::tempdir().unwrap();
    let [bpf, pl] = write_unit_filter(dir.path());
    let checks = dir.path().join("checks");
    let out = std::process::Command::new("perl")
        .arg(&pl)
        .arg(&bpf)
        .arg(&checks)
        .args(["sh", "-c", "grep -E '^Seccomp' /proc/self/status"])
        .output()
        .expect("perl runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    let checks = std::fs::read_to_string(&checks).unwrap();
    // afs_syscall: ENOSYS (38) without the filter, EPERM (1) under it.
    assert!(checks.contains("seccomp_afs_errno=1\n"), "{checks}");
    assert!(checks.contains("seccomp_inet_errno=97\n"), "{checks}");
    assert!(checks.contains("seccomp_unix_errno=0\n"), "{checks}");
    // The command ran under the filter (mode 2: filter), and only under it.
    assert!(stdout.contains("Seccomp:\t2"), "{stdout}");
    assert!(stdout.contains("Seccomp_filters:\t1"), "{stdout}");
}

const HELPERS: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
ms() { date +%s%3N; }
state() { cat /sys/kernel/sched_ext/state; }
wait_enabled() { i=0; while [ "$(state)" != enabled ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; }
# wait_mode M: until `asa status` says mode M (the socket answers from the start, mode starting).
wait_mode() { i=0; until asa status --json 2>/dev/null | grep -q "\"mode\": \"$1\"" || [ $i -ge 300 ]; do sleep 0.2; i=$((i+1)); done; }
alive() { kill -0 "$1" 2>/dev/null && echo 1 || echo 0; }
"#;

#[test]
#[ignore = "boots the lab VM"]
fn a_foreign_scheduler_is_waited_for_or_taken_over() {
    let script = format!(
        "{HELPERS}{}",
        r#"
# 1. Waiting (the default): another tool's bpfland is attached when the agent starts.
scx_bpfland > /lab/out/foreign1.log 2>&1 &
F=$!
wait_enabled
rec foreign_ops "$(cat /sys/kernel/sched_ext/root/ops)"
asa run {args} > /lab/out/wait.log 2>&1 &
D=$!
wait_mode waiting
sleep 3
asa status --json > /lab/out/waiting.json; rec status_while_waiting $?
asa status > /lab/out/waiting.txt
asa pin eevdf > /lab/out/pin_while_waiting.err 2>&1; rec pin_while_waiting $?
rec agent_alive_while_waiting $(alive $D)
rec foreign_alive_while_waiting $(alive $F)
rec state_while_waiting $(state)
rec t_foreign_stop $(ms)
kill -INT $F
asa status --wait-for eevdf --timeout 60 --json > /lab/out/took_control.json; rec took_control $?
rec t_took_control $(ms)
kill -TERM $D; wait $D; rec wait_exit $?
# 2. --take-over: the agent asks the owner to stop.
scx_bpfland > /lab/out/foreign2.log 2>&1 &
F=$!
wait_enabled
rec t_takeover_start $(ms)
asa run {args} --take-over > /lab/out/takeover.log 2>&1 &
D=$!
asa status --wait-for eevdf --timeout 60 --json > /lab/out/takeover.json; rec took_over $?
rec t_took_over $(ms)
sleep 1
rec foreign_alive_after_takeover $(alive $F)
wait $F; rec foreign_exit $?
kill -TERM $D; wait $D; rec takeover_exit $?
rec final_state $(state)
"#
    );
    let (out, console) = lab_run("foreign", &script, "eevdf", None);
    let log = |n: &str| out.read_out(n).unwrap_or_default();
    eprintln!(
        "---- guest console ----\n{console}\n---- wait.log ----\n{}\n---- takeover.log ----\n{}",
        log("wait.log"),
        log("takeover.log")
    );
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();
    let t = |k: &str| -> u64 { r[k].parse().unwrap_or_else(|_| panic!("{k}: {r:?}")) };
    assert!(r["foreign_ops"].starts_with("bpfland"), "{r:?}");

    // Waiting: alive, serving status, refusing pins, not touching the foreign scheduler.
    assert_eq!(r["status_while_waiting"], "0", "{r:?}");
    let waiting: Value = serde_json::from_str(&log("waiting.json")).unwrap();
    let agent = &waiting["agent"];
    assert_eq!(agent["mode"], "waiting", "{waiting:#}");
    let note = agent["note"].as_str().unwrap();
    assert!(
        note.contains("bpfland") && note.contains("waits for it to go"),
        "{note}"
    );
    assert!(
        log("waiting.txt").contains("agent:       waiting"),
        "{}",
        log("waiting.txt")
    );
    assert_ne!(r["pin_while_waiting"], "0");
    assert!(
        log("pin_while_waiting.err").contains("waiting for another tool's scheduler"),
        "{}",
        log("pin_while_waiting.err")
    );
    assert_eq!(r["agent_alive_while_waiting"], "1");
    assert_eq!(r["foreign_alive_while_waiting"], "1");
    assert_eq!(r["state_while_waiting"], "enabled");
    let wait_log = log("wait.log");
    assert_eq!(
        wait_log
            .matches("another sched_ext scheduler is attached")
            .count(),
        1,
        "logged once: {wait_log}"
    );
    // It takes control once the foreign scheduler has gone.
    assert_eq!(r["took_control"], "0", "{r:?}");
    let took: Value = serde_json::from_str(&log("took_control.json")).unwrap();
    assert_eq!(took["agent"]["mode"], "daemon");
    assert_eq!(took["agent"]["consistent"], true);
    let waited_ms = t("t_took_control") - t("t_foreign_stop");
    eprintln!("took control {waited_ms} ms after the foreign scheduler was stopped");
    assert!(waited_ms < 10_000, "{waited_ms} ms");
    assert!(
        wait_log.contains("the foreign scheduler has gone"),
        "{wait_log}"
    );
    assert_eq!(r["wait_exit"], "0");

    // --take-over.
    assert_eq!(r["took_over"], "0", "{r:?}");
    let take_log = log("takeover.log");
    assert!(
        take_log.contains("sent SIGINT to its owner scx_bpfland"),
        "{take_log}"
    );
    assert_eq!(r["foreign_alive_after_takeover"], "0");
    assert_eq!(r["foreign_exit"], "0", "bpfland detached cleanly on SIGINT");
    let took_over_ms = t("t_took_over") - t("t_takeover_start");
    eprintln!("--take-over: in control {took_over_ms} ms after start");
    assert_eq!(r["takeover_exit"], "0");
    assert_eq!(r["final_state"], "disabled");
}

#[test]
#[ignore = "boots the lab VM"]
fn an_expert_ejected_at_every_attach_is_quarantined_inside_the_units_sandbox() {
    // Every time divided by 3 (5 s cooldown, 20 s first quarantine, 45 s run) unless
    // ASA_TEST_FULL_SCALE is set: the defaults (15 s, 60 s) and a 135 s run.
    let scale: u64 = if std::env::var_os("ASA_TEST_FULL_SCALE").is_some() {
        1
    } else {
        3
    };
    let script = format!(
        "{HELPERS}{}",
        r#"
cat > /lab/asa.toml <<EOF
decision_log = "/var/log/asa/decisions.jsonl"
[policy]
cooldown_s = __COOLDOWN__
quarantine_base_s = __BASE__
EOF
mkdir -p __WRITABLE__
chmod 0700 __WRITABLE__
# The ejector: SysRq-S (sched_ext back to EEVDF) whenever a scheduler is enabled.
( last=$(cat /sys/kernel/sched_ext/enable_seq)
  while :; do
    seq=$(cat /sys/kernel/sched_ext/enable_seq)
    [ "$seq" != "$last" ] && { echo $(ms) >> /lab/out/attach_times; last=$seq; }
    if [ "$(state)" = enabled ]; then echo S > /proc/sysrq-trigger; echo $(ms) >> /lab/out/ejections; fi
    sleep 0.1
  done ) &
E=$!
seq0=$(cat /sys/kernel/sched_ext/enable_seq)
rec t_start $(ms)
# The unit's sandbox, without systemd (see the file's documentation).
cat > /tmp/sandbox.sh <<'EOF'
set -e
ro() { mount -o remount,bind,ro "$1"; }
# ProtectSystem=strict: every mount read-only but the API file systems (below); the unit's
# writable directories (RuntimeDirectory=, LogsDirectory=) bound on top.
for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do
  case "$m" in /proc|/proc/*|/dev|/dev/*|/sys|/sys/*) ;; *) ro "$m" || true ;; esac
done
# (A bind mount copies its source's read-only flag: each is made writable again.)
for d in __WRITABLE__; do mount --bind "$d" "$d"; mount -o remount,bind,rw "$d"; done
# ProtectKernelTunables (and ProtectControlGroups): /sys, /proc/sys, /proc/sysrq-trigger read-only.
for m in $(awk '{print $2}' /proc/self/mounts | grep '^/sys' | sort -u); do ro "$m" || true; done
for p in /proc/sys /proc/sysrq-trigger; do [ -e $p ] && { mount --bind "$p" "$p"; ro "$p"; }; done
# ProtectHome, PrivateTmp.
for h in /root /home /run/user; do [ -d $h ] && mount -t tmpfs -o ro,mode=0755 tmpfs $h; done
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
# PrivateDevices: a /dev with the basic nodes only.
mkdir -p /tmp/.dev
mount -t tmpfs -o mode=0755 tmpfs /tmp/.dev
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9"; do
  set -- $n; mknod -m 0666 /tmp/.dev/$1 c $2 $3
done
mount -n --move /tmp/.dev /dev
# The checks the test reads.
{ touch /etc/asa-sandbox-test 2>/dev/null && echo etc_writable=1 || echo etc_writable=0
  ls /root 2>/dev/null | wc -l | sed 's/^/root_entries=/'
  [ -e /dev/vda ] || [ -e /dev/sda ] || [ -e /dev/ttyS0 ] && echo devices=1 || echo devices=0
  v=$(cat /proc/sys/kernel/printk_ratelimit)
  echo $v > /proc/sys/kernel/printk_ratelimit 2>/dev/null && echo proc_sys_writable=1 || echo proc_sys_writable=0
  touch /run/asa/probe && echo run_asa_writable=1 || echo run_asa_writable=0
} > /run/asa/sandbox-checks 2>/dev/null
ulimit -l unlimited || echo "sandbox: could not raise RLIMIT_MEMLOCK" >&2
# MemoryDenyWriteExecute: the kernel's own version, PR_SET_MDWE (65) with
# PR_MDWE_REFUSE_EXEC_GAIN (1), through perl's syscall (prctl is 157 on x86_64); it is kept
# across execve and fork, so the experts get it too.
# The system-call filters last (the mounts above need @mount): seccomp-exec.pl installs the
# unit's filter, notes its witnesses in the checks and execs the agent.
exec setpriv --bounding-set=BOUNDING_SET --inh-caps=-all --no-new-privs \
  perl -e 'syscall(157, 65, 1, 0, 0, 0) == 0 or die "PR_SET_MDWE: $!"; exec @ARGV or die "exec: $!"' \
  perl /lab/seccomp-exec.pl /lab/seccomp.bpf /run/asa/sandbox-checks \
  asa run ARGS --config /lab/asa.toml --duration-s __DURATION__
EOF
sed -i "s|BOUNDING_SET|__BOUNDING__|; s|ARGS|{args}|" /tmp/sandbox.sh
unshare --mount --propagation private sh /tmp/sandbox.sh > /lab/out/daemon.log 2>&1 &
D=$!
wait_mode daemon
# The agent's (D: unshare, sh and setpriv exec each other) and, once one runs, the expert's
# capabilities.
rec agent_comm "$(cat /proc/$D/comm)"
grep -E '^(CapBnd|CapEff|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/$D/status | tr -d '\t' | sed 's/:/_agent=/' >> /lab/out/results
# The expert lives about a second before the ejector gets it: read its status at once.
i=0; while [ $i -lt 600 ]; do
  X=$(pidof scx_bpfland | tr ' ' '\n' | head -1)
  if [ -n "$X" ] && grep -E '^(CapBnd|CapEff|Seccomp_filters):' /proc/$X/status > /tmp/expert_caps 2>/dev/null; then
    tr -d '\t' < /tmp/expert_caps | sed 's/:/_expert=/' >> /lab/out/results; break
  fi
  sleep 0.05; i=$((i+1))
done
# The first quarantine, as `asa status` shows it.
i=0; while [ $i -lt 60 ]; do
  asa status > /lab/out/quarantined.txt
  grep -q QUARANTINED /lab/out/quarantined.txt && break
  sleep 1; i=$((i+1))
done
asa status --json > /lab/out/quarantined.json
rec t_quarantined $(ms)
wait $D; rec daemon_exit $?
rec t_end $(ms)
kill $E
rec attaches $(( $(cat /sys/kernel/sched_ext/enable_seq) - seq0 ))
rec final_state $(state)
cat /run/asa/sandbox-checks >> /lab/out/results
cp /var/log/asa/decisions.jsonl /lab/out/ 2>/dev/null
"#
        .replace("__COOLDOWN__", &(15 / scale).to_string())
        .replace("__BASE__", &(60 / scale).to_string())
        .replace("__DURATION__", &(135 / scale).to_string())
        .replace("__BOUNDING__", &bounding_set())
        .replace("__WRITABLE__", &writable_dirs().join(" "))
    );
    let (out, console) = lab_run("quarantine", &script, "bpfland", Some(Sandbox));
    let log = |n: &str| out.read_out(n).unwrap_or_default();
    let daemon = log("daemon.log");
    eprintln!("---- guest console ----\n{console}\n---- daemon log ----\n{daemon}");
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();
    eprintln!("{r:#?}");

    // The sandbox was in place, and the agent ran in it.
    assert_eq!(r["etc_writable"], "0", "ProtectSystem=strict");
    assert_eq!(r["root_entries"], "0", "ProtectHome");
    assert_eq!(r["devices"], "0", "PrivateDevices");
    assert_eq!(r["proc_sys_writable"], "0", "ProtectKernelTunables");
    assert_eq!(r["run_asa_writable"], "1", "RuntimeDirectory");
    // CAP_SYS_ADMIN 21, CAP_SYS_NICE 23, CAP_SYS_PTRACE 19, CAP_PERFMON 38, CAP_BPF 39.
    let caps = format!(
        "{:016x}",
        (1u64 << 21) | (1 << 23) | (1 << 19) | (1 << 38) | (1 << 39)
    );
    assert_eq!(r["CapBnd_agent"], caps, "{r:?}");
    assert_eq!(r["CapEff_agent"], caps, "{r:?}");
    assert_eq!(r["NoNewPrivs_agent"], "1");
    // The unit's system-call filters: the witnesses refused as systemd would, the agent under
    // the one filter, the expert under it and the attach gate's.
    assert_eq!(r["seccomp_afs_errno"], "1", "SystemCallFilter: {r:?}");
    assert_eq!(
        r["seccomp_inet_errno"], "97",
        "RestrictAddressFamilies: {r:?}"
    );
    assert_eq!(
        r["seccomp_unix_errno"], "0",
        "RestrictAddressFamilies: {r:?}"
    );
    assert_eq!(r["Seccomp_agent"], "2", "{r:?}");
    assert_eq!(r["Seccomp_filters_agent"], "1", "{r:?}");
    assert!(
        r.get("Seccomp_filters_expert")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n >= 2),
        "the expert inherits the filter under the attach gate's: {r:?}"
    );
    assert_eq!(r["agent_comm"], "asa");
    assert_eq!(
        r.get("CapBnd_expert"),
        Some(&caps),
        "the expert inherits it: {r:?}"
    );
    assert_eq!(r["daemon_exit"], "0", "{daemon}");
    // Nothing the agent or the expert did was refused by the sandbox (the first lab run found
    // scx_bpfland needs /run/scx for its stats socket).
    for denied in [
        "Read-only file system",
        "Permission denied",
        "Operation not permitted",
    ] {
        assert!(!daemon.contains(denied), "{denied}: {daemon}");
    }
    assert!(
        daemon.contains("the kernel detached bpfland"),
        "the failures are the ejections: {daemon}"
    );
    assert_eq!(r["final_state"], "disabled");

    // The quarantine.
    let attaches: u64 = r["attaches"].parse().unwrap();
    let ejections = log("ejections").lines().count();
    let span_s =
        (r["t_end"].parse::<u64>().unwrap() - r["t_start"].parse::<u64>().unwrap()) as f64 / 1000.0;
    eprintln!("{attaches} attaches, {ejections} SysRq-S ejections in {span_s:.1} s");
    assert!(attaches >= 2, "the agent chose bpfland: {attaches}");
    // 3 in the first 120 s (40 s scaled) and, at most, a 4th after the second quarantine
    // (attach 3 at about 80 s, 27 s scaled, then 120 s, 40 s scaled, of quarantine).
    let in_window = log("attach_times")
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .filter(|&t| t < r["t_start"].parse::<u64>().unwrap() + 120_000 / scale)
        .count();
    eprintln!("{in_window} attaches in the first {} s", 120 / scale);
    assert!(
        attaches <= 3 && in_window <= 3,
        "at most 3 attaches in {} s (run ~{span_s:.0} s): {attaches}",
        120 / scale
    );
    let status: Value = serde_json::from_str(&log("quarantined.json")).unwrap();
    let q = &status["agent"]["decision"]["quarantine"];
    let entry = q
        .as_array()
        .and_then(|a| a.iter().find(|e| e["expert"] == "bpfland"))
        .unwrap_or_else(|| panic!("no quarantine entry: {status:#}"));
    assert!(entry["quarantined_for_s"].as_f64().is_some(), "{entry:#}");
    assert!(entry["total_failures"].as_u64().unwrap() >= 2, "{entry:#}");
    let text = log("quarantined.txt");
    assert!(text.contains("bpfland: QUARANTINED for"), "{text}");
    assert!(
        daemon.contains(&format!("quarantined for {} s", 60 / scale)),
        "{daemon}"
    );
    let records: Vec<TickRecord> = log("decisions.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.len() >= 20, "{} ticks logged", records.len());
    let quarantined_ticks = records
        .iter()
        .filter(|r| r.decision.quarantined.contains_key("bpfland"))
        .count();
    assert!(quarantined_ticks >= 10, "{quarantined_ticks} ticks");
}

#[test]
#[ignore = "boots the lab VM"]
fn a_killed_agent_leaves_no_gated_expert_behind() {
    let script = format!(
        "{HELPERS}{}",
        r#"
listeners() { ls -l /proc/$1/fd 2>/dev/null | grep -c 'seccomp notify'; }
gone() { [ ! -d /proc/$1 ] || grep -q '^State:[[:space:]]*[ZX]' /proc/$1/status 2>/dev/null; }
asa pin bpfland > /lab/out/pin.log 2>&1 &
A=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
X=$(pidof scx_bpfland)
rec ops "$(cat /sys/kernel/sched_ext/root/ops)"
rec listeners_expert $(listeners $X)
rec listeners_agent $(listeners $A)
sleep 1
rec t_kill $(ms)
kill -9 $A
t_gone=; t_disabled=; i=0
while [ $i -lt 500 ]; do
  [ -z "$t_gone" ] && gone $X && t_gone=$(ms)
  [ -z "$t_disabled" ] && [ "$(state)" = disabled ] && t_disabled=$(ms)
  [ -n "$t_gone" ] && [ -n "$t_disabled" ] && break
  sleep 0.02; i=$((i+1))
done
rec t_gone "${t_gone:-none}"
rec t_disabled "${t_disabled:-none}"
if [ -z "$t_gone" ]; then
  rec expert_wchan "$(cat /proc/$X/wchan)"
  kill -9 $X
fi
wait $A
sleep 0.5
rec scx_processes $(pidof scx_bpfland | wc -w)
rec final_state $(state)
"#
    );
    let (out, console) = lab_run("killed-agent", &script, "eevdf", None);
    let pin_log = out.read_out("pin.log").unwrap_or_default();
    eprintln!("---- guest console ----\n{console}\n---- pin.log ----\n{pin_log}");
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();
    eprintln!("{r:#?}");
    assert_eq!(r["up"], "0", "{r:?}");
    assert!(r["ops"].starts_with("bpfland"), "{r:?}");
    assert_eq!(r["listeners_expert"], "0", "the expert holds a listener");
    assert_ne!(r["listeners_agent"], "0", "the agent holds the listener");
    let t_kill: u64 = r["t_kill"].parse().unwrap();
    let after = |key: &str| -> u64 {
        r[key]
            .parse::<u64>()
            .map(|t| t - t_kill)
            .unwrap_or_else(|_| panic!("{key}: never within 10 s ({r:?})"))
    };
    let (gone_ms, disabled_ms) = (after("t_gone"), after("t_disabled"));
    eprintln!("agent SIGKILLed: scx_bpfland gone after {gone_ms} ms, sched_ext disabled after {disabled_ms} ms");
    assert!(
        gone_ms < 2000,
        "scx_bpfland exited {gone_ms} ms after the agent died"
    );
    assert!(
        disabled_ms < 2000,
        "sched_ext disabled {disabled_ms} ms after the agent died"
    );
    assert_eq!(r["scx_processes"], "0");
    assert_eq!(r["final_state"], "disabled");
}
