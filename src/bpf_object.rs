//! Checks on the compiled BPF object (build.rs writes it to OUT_DIR) that
//! its load depends on but no VM test would pin down.

#[cfg(test)]
mod tests {
    use libbpf_rs::btf::types::{Linkage, Var};
    use libbpf_rs::btf::{Btf, BtfKind};

    /// Every `__ksym` variable has a type in the kernel's BTF. For a typeless
    /// one (`extern const void sym __ksym`) libbpf reads all of
    /// /proc/kallsyms at every load: `stop_sched_class` was one, and it cost
    /// 7-12 s of each load under TCG (9.7 MB of kallsyms; known-limits.md).
    #[test]
    fn every_extern_variable_has_a_type() {
        let path = concat!(env!("OUT_DIR"), "/bpf.bpf.o");
        let btf = Btf::from_path(path).expect("the BPF object's BTF");
        let mut externs = 0;
        let typeless: Vec<String> = btf
            .type_by_kind::<Var<'_>>()
            .filter(|v| v.linkage() == Linkage::Extern)
            .inspect(|_| externs += 1)
            .filter(|v| {
                let t = v.next_type().expect("a variable refers to a type");
                t.skip_mods_and_typedefs().kind() == BtfKind::Void
            })
            .map(|v| {
                v.name()
                    .map_or("?".into(), |n| n.to_string_lossy().into_owned())
            })
            .collect();
        assert!(
            externs > 0,
            "no extern variables found: is this the object?"
        );
        assert!(
            typeless.is_empty(),
            "typeless extern variables (libbpf reads /proc/kallsyms for them at every load): {typeless:?}"
        );
    }
}
