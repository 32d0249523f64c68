//! The system-call filters of agent/dist/asa.service — `SystemCallFilter=~@group …`,
//! `SystemCallErrorNumber=`, `RestrictAddressFamilies=`, `SystemCallArchitectures=native` — as
//! one classic-BPF seccomp program, so the lab VM (no systemd) can run the real agent inside
//! them: `data/seccomp/seccomp-exec.pl` installs it and execs the agent.
//!
//! The program follows systemd's meaning of each setting: a call from another architecture
//! (or x86_64's x32 ABI) kills the process; a call of a denied group fails with the unit's
//! error number; `socket()` of a family not allowed fails with EAFNOSUPPORT; anything else is
//! allowed. The groups' members are systemd 252's (`data/seccomp/systemd-252-syscall-groups.txt`,
//! the output of `systemd-analyze syscall-filter`), their numbers the host's
//! `<asm/unistd_64.h>` (names x86_64 does not have are skipped, as systemd skips them).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The unit the filter is read from.
const UNIT: &str = include_str!("../../dist/asa.service");

/// The value of the unit's `KEY=` line (`key` with its `=`), trimmed.
pub fn unit_setting(key: &str) -> Result<&'static str, String> {
    UNIT.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .ok_or_else(|| format!("agent/dist/asa.service sets no {key}"))
}

/// Writes the unit's filter (numbers from the host's [`UNISTD_64`]) and its installer into
/// `dir`: `seccomp.bpf` and `seccomp-exec.pl`, in that order.
pub fn write_unit_filter(dir: &Path) -> [PathBuf; 2] {
    let program = UnitFilter::from_host().program();
    let (bpf, pl) = (dir.join("seccomp.bpf"), dir.join("seccomp-exec.pl"));
    std::fs::write(&bpf, program).unwrap();
    std::fs::write(&pl, SECCOMP_EXEC_PL).unwrap();
    [bpf, pl]
}
/// systemd 252's groups.
const GROUPS: &str = include_str!("../data/seccomp/systemd-252-syscall-groups.txt");
/// The installer the guest runs (see the file's header).
pub const SECCOMP_EXEC_PL: &str = include_str!("../data/seccomp/seccomp-exec.pl");
/// The host's system-call numbers.
pub const UNISTD_64: &str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const EAFNOSUPPORT: u32 = 97;
// struct seccomp_data: nr at 0, arch at 4, args[0] (its low half on little-endian) at 16.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;
// Classic BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// The unit's filter, resolved against systemd's groups and the host's numbers.
#[derive(Debug)]
pub struct UnitFilter {
    /// The denied system calls: number → name.
    pub denied: BTreeMap<u32, String>,
    /// The errno a denied call fails with.
    pub errno: u32,
    /// The address families `socket()` may create.
    pub families: Vec<u32>,
    /// socket()'s number.
    pub socket: u32,
}

impl UnitFilter {
    /// [`UnitFilter::from_unit`] with the host's [`UNISTD_64`]; panics, saying what to install,
    /// without it.
    pub fn from_host() -> Self {
        let unistd = std::fs::read_to_string(UNISTD_64)
            .unwrap_or_else(|e| panic!("{UNISTD_64}: {e} (Debian: apt install linux-libc-dev)"));
        Self::from_unit(&unistd).unwrap()
    }

    /// Reads the unit's settings; the numbers come from `unistd_64` (the text of
    /// [`UNISTD_64`]).
    pub fn from_unit(unistd_64: &str) -> Result<Self, String> {
        let groups_denied = unit_setting("SystemCallFilter=")?.strip_prefix('~').ok_or(
            "the unit's SystemCallFilter= is an allow list; this builder knows deny lists",
        )?;
        let errno = match unit_setting("SystemCallErrorNumber=")? {
            "EPERM" => 1,
            other => {
                return Err(format!(
                    "SystemCallErrorNumber={other}: only EPERM is known"
                ))
            }
        };
        if unit_setting("SystemCallArchitectures=")? != "native" {
            return Err("SystemCallArchitectures= other than native".into());
        }
        let families = unit_setting("RestrictAddressFamilies=")?
            .split_whitespace()
            .map(|f| match f {
                "AF_UNIX" => Ok(1),
                "AF_NETLINK" => Ok(16),
                "AF_INET" => Ok(2),
                "AF_INET6" => Ok(10),
                other => Err(format!("RestrictAddressFamilies: unknown family {other}")),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        let numbers = syscall_numbers(unistd_64);
        let groups = systemd_groups(GROUPS);
        let mut denied = BTreeMap::new();
        for group in groups_denied.split_whitespace() {
            let members = groups
                .get(group)
                .ok_or_else(|| format!("{group} is not in systemd 252's groups"))?;
            for name in members {
                if let Some(&nr) = numbers.get(name.as_str()) {
                    denied.insert(nr, name.clone());
                }
            }
        }
        let socket = *numbers.get("socket").ok_or("no socket() in unistd_64.h")?;
        if denied.contains_key(&socket) {
            return Err("the unit denies socket() altogether".into());
        }
        Ok(Self {
            denied,
            errno,
            families,
            socket,
        })
    }

    /// The program: 8 bytes an instruction (`struct sock_filter`, little-endian).
    pub fn program(&self) -> Vec<u8> {
        let mut p: Vec<(u16, u8, u8, u32)> = vec![
            (LD_W_ABS, 0, 0, OFFSET_ARCH),
            (JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
            (RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
            (LD_W_ABS, 0, 0, OFFSET_NR),
            (JSET_K, 0, 1, X32_SYSCALL_BIT),
            (RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        ];
        for &nr in self.denied.keys() {
            p.push((JEQ_K, 0, 1, nr));
            p.push((RET_K, 0, 0, SECCOMP_RET_ERRNO | self.errno));
        }
        // socket(): its family (args[0]) must be allowed; every other call goes to the allow.
        let n = self.families.len() as u8;
        p.push((JEQ_K, 0, n + 2, self.socket));
        p.push((LD_W_ABS, 0, 0, OFFSET_ARG0));
        for (i, &family) in self.families.iter().enumerate() {
            // To the allow: past the remaining family tests and the refusal.
            p.push((JEQ_K, n - i as u8, 0, family));
        }
        p.push((RET_K, 0, 0, SECCOMP_RET_ERRNO | EAFNOSUPPORT));
        p.push((RET_K, 0, 0, SECCOMP_RET_ALLOW));
        p.iter()
            .flat_map(|&(code, jt, jf, k)| {
                let mut b = code.to_le_bytes().to_vec();
                b.extend([jt, jf]);
                b.extend(k.to_le_bytes());
                b
            })
            .collect()
    }
}

/// `#define __NR_name N` lines.
pub fn syscall_numbers(unistd_64: &str) -> BTreeMap<&str, u32> {
    unistd_64
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("#define __NR_")?;
            let (name, nr) = rest.split_once(char::is_whitespace)?;
            Some((name, nr.trim().parse().ok()?))
        })
        .collect()
}

/// `systemd-analyze syscall-filter` output: `@group`, then its members indented (comments
/// start with `#`).
fn systemd_groups(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            current = Some(trimmed.to_string());
            groups.entry(trimmed.to_string()).or_default();
        } else if let Some(group) = &current {
            groups.get_mut(group).unwrap().insert(trimmed.to_string());
        }
    }
    groups
}
