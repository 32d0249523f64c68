#!/bin/sh
# The sandbox of agent/dist/asa.service rebuilt without systemd, for a dry run of the agent on
# a host: run inside a private mount namespace as root, e.g.
#   ORT=/opt/ort/libonnxruntime.so unshare -m sh lab/experiments/host-sandbox-dry-run.sh
# (ASA: the asa binary, default target/release/asa).
# It remounts everything read-only but the unit's writable directories (ProtectSystem=strict),
# makes the kernel tunables read-only (ProtectKernelTunables) and starts `asa run --dry-run`.
# The VM test agent/tests/vm_hardening.rs does the same in the lab guest with the real experts.
set -e
ro() { mount -o remount,bind,ro "$1"; }
# ProtectSystem=strict: every mount read-only but the API file systems (below); the unit's
# writable directories bound on top.
for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do
  case "$m" in /proc|/proc/*|/dev|/dev/*|/sys|/sys/*) ;; *) ro "$m" || true ;; esac
done
# (A bind mount copies its source's read-only flag: each is made writable again.)
for d in /run/asa /run/scx_gru /var/log/asa; do mount --bind "$d" "$d"; mount -o remount,bind,rw "$d"; done
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
} > /run/asa/sandbox-checks
ulimit -l unlimited || echo "sandbox: could not raise RLIMIT_MEMLOCK" >&2
exec setpriv --bounding-set=-all,+sys_admin,+bpf,+perfmon,+sys_nice,+sys_ptrace --inh-caps=-all --no-new-privs \
  "${ASA:-target/release/asa}" --socket /run/asa/control.sock run --dry-run --interval-ms 500 --duration-s 4 --onnxruntime "${ORT:?set ORT to a libonnxruntime.so outside /root (ProtectHome)}" --decision-log /var/log/asa/decisions.jsonl
