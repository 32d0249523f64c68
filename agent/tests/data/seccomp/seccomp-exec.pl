# Installs a seccomp filter and runs a command under it, as systemd does for a unit's
# SystemCallFilter= (used by agent/tests/vm_hardening.rs, whose guest has no systemd).
#
#   perl seccomp-exec.pl FILTER CHECKS COMMAND [ARGS...]
#
# FILTER: a classic-BPF seccomp program (struct sock_filter[], 8 bytes an instruction; see
# agent/tests/sandbox_common). Sets no_new_privs (required for an unprivileged filter; a unit
# with SystemCallFilter= gets it too), installs the filter, appends three witnesses to CHECKS
# and execs COMMAND, which keeps the filter, as do its children.
# Numbers are x86_64's: prctl 157, seccomp 317, afs_syscall 183.
use strict;
use warnings;

my ($filter, $checks) = splice(@ARGV, 0, 2);
@ARGV or die "usage: perl seccomp-exec.pl FILTER CHECKS COMMAND [ARGS...]\n";
open(my $f, '<:raw', $filter) or die "seccomp filter $filter: $!\n";
my $prog = do { local $/; <$f> };
close $f;
length($prog) > 0 && length($prog) % 8 == 0 or die "seccomp filter $filter: not whole instructions\n";
# PR_SET_NO_NEW_PRIVS (38).
syscall(157, 38, 1, 0, 0, 0) == 0 or die "PR_SET_NO_NEW_PRIVS: $!\n";
# struct sock_fprog { unsigned short len; struct sock_filter *filter; }; SECCOMP_SET_MODE_FILTER (1).
my $fprog = pack('S x6 P', length($prog) / 8, $prog);
syscall(317, 1, 0, $fprog) == 0 or die "seccomp(SECCOMP_SET_MODE_FILTER): $!\n";

# Witnesses, as errno values (0: the call succeeded): afs_syscall (@obsolete) is ENOSYS (38)
# without the filter and its error number under it; a TCP socket is refused with EAFNOSUPPORT
# (97) unless AF_INET is allowed; a Unix socket must work.
open(my $c, '>>', $checks) or die "$checks: $!\n";
my $afs = syscall(183, 0, 0, 0, 0, 0);
print $c "seccomp_afs_errno=", ($afs == -1 ? $! + 0 : 0), "\n";
print $c "seccomp_inet_errno=", (socket(my $inet, 2, 1, 0) ? 0 : $! + 0), "\n";
print $c "seccomp_unix_errno=", (socket(my $unix, 1, 1, 0) ? 0 : $! + 0), "\n";
close $c;
exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!\n";
