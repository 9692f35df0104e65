//! The scx_stats side: the server the scheduler runs on the standard
//! socket, `--help-stats`, and the client `--stats` and `--monitor` print
//! through.

use super::{print_metrics, Cgroup, Cpu, Group, Metrics, Threshold};
use anyhow::{Context, Result};
use scx_stats::prelude::*;

/// The scx_stats server's description of the metrics ("top" is what
/// `--monitor` and scxtop ask for); the scheduler answers requests on the
/// returned channels.
pub fn server_data() -> StatsServerData<(), Metrics> {
    StatsServerData::new()
        .add_meta(Group::meta())
        .add_meta(Cpu::meta())
        .add_meta(Threshold::meta())
        .add_meta(Cgroup::meta())
        .add_meta(Metrics::meta())
        .add_stats(
            "top",
            Box::new(move |_args, (req, res)| {
                req.send(())?;
                res.recv()?.to_json()
            }),
        )
}

/// Starts the stats server on the standard socket, reachable by root only:
/// the socket is created under umask 077 (no window where others may
/// connect) and its directory closed to others too.
pub fn launch_server() -> Result<StatsServer<(), Metrics>> {
    // SAFETY: umask only changes this process's file creation mask.
    let old = unsafe { libc::umask(0o077) };
    let server = StatsServer::new(server_data()).launch();
    unsafe { libc::umask(old) };
    let server = server.context("starting the stats server")?;
    Ok(server)
}

/// `--help-stats`: every metric with its description.
pub fn help() -> Result<()> {
    server_data().describe_meta(&mut std::io::stdout(), None)
}

/// `--monitor` and `--stats`: prints the running scheduler's metrics every
/// `interval` seconds in `fmt` (the human summary, the `stats:` line with
/// the busiest cgroups' `cgroup:` lines, or one JSON object),
/// until `shutdown` or until nobody reads the output any more (a closed
/// pipe, `| head -1`: that ends the monitor quietly, not the scheduler).
pub fn monitor(
    interval: f64,
    fmt: super::StatsFormat,
    shutdown: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    let mut prev: Option<Metrics> = None;
    let res = scx_utils::monitor_stats::<Metrics>(
        &[],
        std::time::Duration::from_secs_f64(interval),
        || shutdown.load(Ordering::Relaxed),
        |m| {
            let r = print_metrics(&m, prev.as_ref(), fmt);
            prev = Some(m);
            r
        },
    );
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        r => r,
    }
}

/// Whether an error comes from writing to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
