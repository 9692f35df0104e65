//! Chris Mason's schbench (third_party/schbench, GPL-2.0, built by build.rs):
//! 2 message threads each wake WORKERS/2 workers, which think and sleep;
//! wakeup latency percentiles, request latency and RPS from its JSON output.

use super::tool::Tool;
use super::{higher, lower, pow2_upto, Opts, Spec};
use anyhow::{Context, Result};
use std::time::Duration;

pub static SPEC: Spec = Spec {
    name: "mason-schbench",
    param: "workers",
    about: "Chris Mason's schbench -m 2 -t ceil(WORKERS/2) -r SECS (vendored; an odd WORKERS runs one more): wakeup p99",
    metrics: &[
        lower("p99", "us"),
        lower("p50", "us"),
        lower("p99.9", "us"),
        lower("request_p99", "us"),
        higher("rps_p50", "1/s"),
    ],
    default_points: pow2_upto,
};

const MESSAGE_THREADS: u32 = 2;

/// The copy build.rs compiled; in the VM guest, the one --vm copies to /bin.
const BUILT: Tool = Tool {
    bin: env!("NIMBLE_SCHBENCH"),
    package: "none: build.rs compiles third_party/schbench",
};
const ON_PATH: Tool = Tool {
    bin: "schbench",
    package: "none: build.rs compiles third_party/schbench",
};

/// The schbench binary to run (its path, for --vm to copy too).
pub fn tool() -> &'static Tool {
    match std::path::Path::new(BUILT.bin).is_file() {
        true => &BUILT,
        false => &ON_PATH,
    }
}

pub fn run(workers: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let json = tempfile::NamedTempFile::new()?;
    let path = json.path().to_str().context("temp path")?.to_string();
    let t = workers.div_ceil(MESSAGE_THREADS).max(1).to_string();
    let secs = (opts.secs.ceil() as u64).max(1);
    let (m, r) = (MESSAGE_THREADS.to_string(), secs.to_string());
    // -i: no interval reports before the final one.
    let args = ["-m", &m, "-t", &t, "-r", &r, "-i", "3600", "-j", &path];
    tool().output(&args, Duration::from_secs(secs + 60))?;
    let text = std::fs::read_to_string(&path)?;
    parse(&text).with_context(|| format!("schbench's JSON lacks the latencies: {text:?}"))
}

/// The metrics from schbench's `-j` output ({"int": {"wakeup_latency_pct99.0": …}}).
fn parse(text: &str) -> Option<Vec<(String, f64)>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let int = v.get("int")?;
    let get = |k: &str| int.get(k).and_then(|x| x.as_f64());
    Some(vec![
        ("p99".into(), get("wakeup_latency_pct99.0")?),
        ("p50".into(), get("wakeup_latency_pct50.0")?),
        ("p99.9".into(), get("wakeup_latency_pct99.9")?),
        ("request_p99".into(), get("request_latency_pct99.0")?),
        // The median of its per-second RPS samples (0 in a 1 s run: the
        // first second is partial).
        ("rps_p50".into(), get("rps_pct50.0")?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_its_json() {
        let j = r#"{"normal": {"version": "x"},"int": {"wakeup_latency_pct50.0": 20, "wakeup_latency_pct99.0": 779, "wakeup_latency_pct99.9": 2716, "request_latency_pct99.0": 6728, "rps_pct50.0": 629}}"#;
        let m = parse(j).unwrap();
        assert_eq!(m[0], ("p99".to_string(), 779.0));
        assert_eq!(m[4], ("rps_p50".to_string(), 629.0));
        assert!(parse("{}").is_none());
    }

    #[test]
    fn mason_schbench_tiny() {
        let m = crate::workloads::tests::check("mason-schbench", 2);
        assert!(m["p99"] >= m["p50"] && m["p50"] > 0.0, "{m:?}");
    }
}
