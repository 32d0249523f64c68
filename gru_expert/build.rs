//! Compiles the BPF programs (the scheduler, the recorder and the floor control) into libbpf-rs
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
    scx_cargo::BpfBuilder::new()
        .expect("set up the BPF builder (is clang on PATH?)")
        .enable_skel("src/bpf/floor.bpf.c", "floor")
        .build()
        .expect("build the scx_floor BPF scheduler");
}
