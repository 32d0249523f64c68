//! A guest disk whose I/Os take a fixed time on a guest timer: the kernel's `null_blk`, backed
//! by guest RAM, with timer completions (`irqmode=2`), created through configfs and formatted
//! ext4.
//!
//! The lab's virtio disks pass every I/O through qemu's block layer to a file on the host, so
//! their service time varies with everything else the host does (the host here is itself a
//! VM): round-to-round scatter of ±20–40 % on I/O loads, against ±1–2 % on CPU loads. On this
//! disk an I/O's device time is the completion delay, the same under every scheduler; what
//! still varies is the guest's own CPU time (system calls, ext4, block layer, wake-ups), which
//! is what a CPU scheduler changes. A submitting task still sleeps until the timer fires and its
//! completion wakes it, as on a real disk.
//!
//! The guest gets the modules at boot (`configfs`, then `null_blk nr_devices=0`:
//! [`crate::kernel::GUEST_MODULES`]); a guest script includes [`TIMER_DISK_SH`] and calls
//! `timer_disk MOUNTPOINT LATENCY_NS SIZE_MIB`.

/// Shell function `timer_disk MOUNTPOINT LATENCY_NS SIZE_MIB` for a guest script: creates a
/// RAM-backed `null_blk` device of SIZE_MIB MiB (4 KiB blocks, one submission queue per CPU,
/// 64 requests deep each) whose requests complete LATENCY_NS after submission on a guest
/// hrtimer, makes ext4 on it (inode tables and journal written at once: no `ext4lazyinit`
/// thread writing in the background of a measurement) and mounts it at MOUNTPOINT (created).
/// Prints the device (`/dev/asa0`); returns non-zero with a message on stderr when a step
/// fails (no `null_blk` module, configfs missing, mkfs or mount failing).
pub const TIMER_DISK_SH: &str = r#"
timer_disk() {
  td_mnt=$1; td_ns=$2; td_mib=$3
  [ -d /sys/module/null_blk ] || { echo "timer_disk: no null_blk module in the guest kernel" >&2; return 1; }
  [ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config 2> /dev/null
  [ -d /sys/kernel/config/nullb ] || { echo "timer_disk: no /sys/kernel/config/nullb (configfs)" >&2; return 1; }
  n=0; while [ -e /sys/kernel/config/nullb/asa$n ]; do n=$((n+1)); done
  td_dir=/sys/kernel/config/nullb/asa$n
  mkdir $td_dir || return 1
  echo $td_mib > $td_dir/size && echo 4096 > $td_dir/blocksize && echo 1 > $td_dir/memory_backed \
    && echo 2 > $td_dir/queue_mode && echo $(nproc) > $td_dir/submit_queues \
    && echo 64 > $td_dir/hw_queue_depth && echo 2 > $td_dir/irqmode \
    && echo $td_ns > $td_dir/completion_nsec && echo 1 > $td_dir/power \
    || { echo "timer_disk: configuring $td_dir failed" >&2; return 1; }
  # The disk is named after the configfs item (kernels since 5.19), nullb<index> before.
  td_dev=; i=0
  while [ -z "$td_dev" ] && [ $i -lt 50 ]; do
    for d in /dev/asa$n /dev/nullb$(cat $td_dir/index); do [ -b $d ] && td_dev=$d; done
    [ -n "$td_dev" ] || sleep 0.1; i=$((i+1))
  done
  [ -n "$td_dev" ] || { echo "timer_disk: no block device for $td_dir" >&2; return 1; }
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 $td_dev > /dev/null \
    || { echo "timer_disk: mkfs.ext4 $td_dev failed" >&2; return 1; }
  mkdir -p $td_mnt && mount -t ext4 $td_dev $td_mnt \
    || { echo "timer_disk: mounting $td_dev at $td_mnt failed" >&2; return 1; }
  echo $td_dev
}
"#;
