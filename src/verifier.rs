//! What the kernel's verifier did with each BPF program of the loaded
//! object: its processed-instruction count (`verified_insns` of
//! `bpf_prog_info`, what veristat reports). The count follows the paths the
//! verifier had to walk, so it is the cost a change adds to every load
//! (and every reload after a CPU hotplug); the kernel refuses a program
//! past 1 000 000. Logged at load; tests/guest/verifier.sh holds budgets.

use libbpf_rs::{libbpf_sys, AsRawLibbpf, Object};

/// (program name, verified instructions) of every loaded program, largest
/// first.
pub fn verified_insns(obj: &Object) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = obj
        .progs()
        .filter_map(|p| {
            // SAFETY: the program belongs to the live object `obj`; a
            // program that was not loaded has no fd (-1) and is skipped.
            let fd = unsafe { libbpf_sys::bpf_program__fd(p.as_libbpf_object().as_ptr()) };
            if fd < 0 {
                return None;
            }
            let mut info = libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: `info` is a plain C struct of `len` bytes and asks for
            // no arrays, so the kernel writes nothing outside it.
            let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
            (rc == 0).then(|| (p.name().to_string_lossy().into_owned(), info.verified_insns))
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// "N programs, T instructions verified; largest: a X, b Y, c Z".
pub fn summary(progs: &[(String, u32)]) -> String {
    let total: u64 = progs.iter().map(|(_, n)| u64::from(*n)).sum();
    let top: Vec<String> = progs
        .iter()
        .take(3)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    format!(
        "{} programs, {total} instructions verified; largest: {}",
        progs.len(),
        top.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_the_largest_three_and_the_total() {
        let v = vec![
            ("nimble_dispatch".to_string(), 9000),
            ("nimble_enqueue".to_string(), 5000),
            ("nimble_tick".to_string(), 700),
            ("nimble_exit".to_string(), 10),
        ];
        assert_eq!(
            summary(&v),
            "4 programs, 14710 instructions verified; largest: nimble_dispatch 9000, \
             nimble_enqueue 5000, nimble_tick 700"
        );
    }
}
