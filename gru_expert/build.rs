//! Compiles the BPF programs (the scheduler, the recorder, the floor control and the in-BPF
//! model's host programs) into libbpf-rs skeletons and generates Rust bindings for the shared
//! headers `intf.h` and `mlp_intf.h`.

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("set up the BPF builder (is clang on PATH?)")
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .expect("build the scx_gru BPF scheduler");
    scx_cargo::BpfBuilder::new()
        .expect("set up the BPF builder (is clang on PATH?)")
        .enable_skel("src/bpf/recorder.bpf.c", "recorder")
        .build()
        .expect("build the gru_record BPF tracer");
    scx_cargo::BpfBuilder::new()
        .expect("set up the BPF builder (is clang on PATH?)")
        .enable_skel("src/bpf/floor.bpf.c", "floor")
        .build()
        .expect("build the scx_floor BPF scheduler");
    scx_cargo::BpfBuilder::new()
        .expect("set up the BPF builder (is clang on PATH?)")
        .enable_intf("src/bpf/mlp_intf.h", "mlp_intf.rs")
        .enable_skel("src/bpf/mlp_bench.bpf.c", "mlp_bench")
        .build()
        .expect("build the in-BPF model's host programs");
}
