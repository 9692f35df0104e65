//! `scx_nimble topology`: the scheduling domains of one CPU as the kernel
//! builds them, with the imb_numa_nr of each level, for people and scripts.

use super::domains::{self, Domain};
use super::imb::ImbFormula;
use super::sysfs::{format_cpulist, SysTopo};
use anyhow::{bail, Result};
use std::fmt::Write;
use std::path::Path;

pub fn formula_name(f: ImbFormula) -> &'static str {
    match f {
        ImbFormula::Mainline => "mainline",
        ImbFormula::V5_18 => "v5.18",
        ImbFormula::V4 => "v4",
    }
}

/// The attached (debugfs-visible) domains of `cpu`, bottom-up.
pub fn cpu_domains(root: &Path, cpu: usize, formula: ImbFormula) -> Result<Vec<Domain>> {
    let t = SysTopo::read(root)?;
    if !t.online.contains(&cpu) {
        bail!(
            "CPU {cpu} is not online (online: {})",
            format_cpulist(&t.online)
        );
    }
    let full = domains::full_domains(&t, cpu, formula, domains::RECLAIM_DISTANCE);
    Ok(domains::attached(&full))
}

pub fn json(cpu: usize, formula: ImbFormula, ds: &[Domain]) -> String {
    let domains: Vec<serde_json::Value> = ds
        .iter()
        .map(|d| {
            serde_json::json!({
                "name": d.name,
                "span_weight": d.span.len(),
                "cpus": format_cpulist(&d.span),
                "flags": d.flag_names(),
                "imb_numa_nr": d.imb_numa_nr,
            })
        })
        .collect();
    serde_json::json!({ "cpu": cpu, "formula": formula_name(formula), "domains": domains })
        .to_string()
}

/// Bottom-up, like the seed's worked examples: "MC2 -> PKG4 -> NUMA8", then
/// one line per level.
pub fn human(cpu: usize, formula: ImbFormula, ds: &[Domain]) -> String {
    let mut s = String::new();
    let chain: Vec<String> = ds
        .iter()
        .map(|d| format!("{}{}", d.name, d.span.len()))
        .collect();
    let _ = writeln!(
        s,
        "CPU {cpu}: {}   (imb_numa_nr formula: {})",
        chain.join(" -> "),
        formula_name(formula)
    );
    for (i, d) in ds.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:indent$}{} {:<4} span {:>3}  cpus {:<12} imb_numa_nr {:>3}  {}",
            "",
            if i == 0 { "*" } else { "└" },
            d.name,
            d.span.len(),
            format_cpulist(&d.span),
            d.imb_numa_nr,
            d.flag_names().join(" "),
            indent = 2 * i
        );
    }
    s
}
