//! Build script: compiles the perception BPF program (src/bpf/perception.bpf.c) and generates
//! its libbpf-rs skeleton into OUT_DIR (included by src/perception/bpf.rs).
//!
//! Offline and reproducible: the program needs no vmlinux.h (see src/bpf/perception_types.h,
//! CO-RE relocations resolve kernel offsets at load time); the libbpf headers come from
//! libbpf-sys through libbpf-cargo. The BPF compiler is `$BPF_CLANG`, else
//! `/usr/lib/llvm-19/bin/clang` when present, else `clang` on PATH.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

const SOURCE: &str = "src/bpf/perception.bpf.c";

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
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("perception.skel.rs");
    let clang = bpf_clang();
    SkeletonBuilder::new()
        .source(SOURCE)
        .clang(&clang)
        .clang_args(["-Wall", "-Isrc/bpf"])
        .build_and_generate(&out)
        .unwrap_or_else(|e| {
            panic!(
                "build the perception BPF program {SOURCE} with {}: {e:#} (set BPF_CLANG to a clang with the bpf target)",
                clang.display()
            )
        });
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
}
