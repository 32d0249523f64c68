//! Compiles the BPF programs (the scheduler and the recorder) into libbpf-rs
//! skeletons and generates Rust bindings for the shared header `intf.h`.

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
}
