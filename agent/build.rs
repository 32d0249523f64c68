//! Build script: compiles the agent's BPF programs (perception: src/bpf/perception.bpf.c and
//! src/bpf/task_scan.bpf.c; action: src/bpf/app_hints.bpf.c) and generates their libbpf-rs
//! skeletons into OUT_DIR (included by src/perception/bpf.rs, src/perception/task_scan.rs and
//! src/action/app_hints.rs).
//!
//! Offline and reproducible: the program needs no vmlinux.h (see src/bpf/perception_types.h,
//! CO-RE relocations resolve kernel offsets at load time); the libbpf headers come from
//! libbpf-sys through libbpf-cargo. The BPF compiler is `$BPF_CLANG`, else
//! `/usr/lib/llvm-19/bin/clang` when present, else `clang` on PATH.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The BPF programs and the skeleton each one gets: the scheduler counters (tracepoints) and
/// the per-process scan (a task iterator), and the application hints for scx_layered: separate
/// objects so each can fail to load alone.
const SOURCES: [(&str, &str); 3] = [
    ("src/bpf/perception.bpf.c", "perception.skel.rs"),
    ("src/bpf/task_scan.bpf.c", "task_scan.skel.rs"),
    ("src/bpf/app_hints.bpf.c", "app_hints.skel.rs"),
];

fn bpf_clang() -> PathBuf {
    if let Some(clang) = env::var_os("BPF_CLANG") {
        return PathBuf::from(clang);
    }
    let debian_clang = Path::new("/usr/lib/llvm-19/bin/clang");
    if debian_clang.exists() {
        return debian_clang.to_path_buf();
    }
    PathBuf::from("clang")
}

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = bpf_clang();
    for (source, skeleton) in SOURCES {
        SkeletonBuilder::new()
            .source(source)
            .clang(&clang)
            .clang_args(["-Wall", "-Isrc/bpf"])
            .build_and_generate(out_dir.join(skeleton))
            .unwrap_or_else(|e| {
                panic!(
                    "build the BPF program {source} with {}: {e:#} (set BPF_CLANG to a clang with the bpf target)",
                    clang.display()
                )
            });
    }
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
}
