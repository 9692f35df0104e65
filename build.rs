// Compiles src/bpf/main.bpf.c into a skeleton, generates Rust bindings for
// src/bpf/intf.h (the one header BPF and userspace share), and compiles the
// pure decision functions of src/bpf/rules.h for the host, so the unit tests
// call the code BPF runs.
fn main() {
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
    cc::Build::new()
        .file("src/bpf/rules_host.c")
        .include("src/bpf")
        .warnings(true)
        .compile("nimble_rules");
    for f in ["src/bpf/rules.h", "src/bpf/rules_host.c", "src/bpf/intf.h"] {
        println!("cargo:rerun-if-changed={f}");
    }
}
