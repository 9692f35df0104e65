//! The real tbench (Debian's dbench package): `tbench_srv` on loopback and
//! `tbench -t SECS CLIENTS 127.0.0.1` replaying dbench's NetBench loadfile
//! over TCP, one client process and one server process per connection.
//! Not to be confused with the lab's own `tbench` (a plain TCP ping-pong).

use super::tool::{number_before, Group, Tool};
use super::{higher, lower, pow2_upto, Opts, Spec};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "dbench-tbench",
    param: "clients",
    about: "real tbench + tbench_srv (dbench), CLIENTS on loopback for SECS (>= 2): MB/sec",
    metrics: &[higher("throughput", "MB/s"), lower("max_latency", "ms")],
    default_points: |n| pow2_upto(2 * n),
};

const TBENCH: Tool = Tool {
    bin: "tbench",
    package: "dbench",
};
const TBENCH_SRV: Tool = Tool {
    bin: "tbench_srv",
    package: "dbench",
};
/// Where Debian's dbench installs the loadfile; `--vm` puts it at the same
/// path in the guest.
pub(crate) const LOADFILE: &str = "/usr/share/dbench/client.txt";
/// tbench_srv's port: fixed in dbench 4.0, no option changes it.
const PORT: u16 = 7003;
/// How long tbench_srv may take to listen, and tbench to start its clients
/// and clean up after `-t` (slow under TCG).
const START: Duration = Duration::from_secs(30);
const MARGIN: Duration = Duration::from_secs(120);

pub fn run(clients: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    if !std::path::Path::new(LOADFILE).is_file() {
        bail!("{LOADFILE} missing (Debian package dbench)");
    }
    // Another server on the port would serve our clients instead of ours.
    if listening(PORT) {
        bail!("port {PORT} is already in use (a tbench_srv left running?)");
    }
    let srv = start_server()?;
    // -t takes whole seconds, and at least 2: tbench's throughput is the
    // running average at its last once-a-second report, so -t 1 reports 0.
    let secs = opts.secs.ceil().max(2.0) as u64;
    let (t, n) = (secs.to_string(), clients.to_string());
    let deadline = Instant::now() + Duration::from_secs(secs) + MARGIN;
    let out = TBENCH
        .spawn(&["-t", &t, "-c", LOADFILE, &n, "127.0.0.1"])?
        .finish(deadline)?;
    drop(srv); // kills the server and its per-connection children
    let (mbps, lat) = parse(&out)?;
    Ok(vec![
        ("throughput".into(), mbps),
        ("max_latency".into(), lat),
    ])
}

/// tbench_srv, once it listens; tbench without a server retries for 30+ s
/// and then reports 0 MB/sec with success, so this must come first.
fn start_server() -> Result<Group> {
    let mut srv = TBENCH_SRV.spawn(&[])?;
    let until = Instant::now() + START;
    while !listening(PORT) {
        let c = srv.child().expect("not finished");
        if let Some(st) = c.try_wait()? {
            let mut err = String::new();
            c.stderr.take().map(|mut e| e.read_to_string(&mut err));
            bail!("tbench_srv exited ({st}): {}", err.trim());
        }
        if Instant::now() > until {
            bail!(
                "tbench_srv did not listen on port {PORT} within {} s",
                START.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(srv)
}

/// Whether a TCP socket listens on `port` (any address, IPv4 or IPv6).
fn listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|s| listens_in(&s, port)))
}

/// In /proc/net/tcp's format: "sl local_address rem_address st …", the
/// address as HEXADDR:HEXPORT, state 0A = LISTEN.
fn listens_in(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let port_of = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
        w.len() > 3 && w[3] == "0A" && port_of(w[1]) == Some(port)
    })
}

/// (MB/sec, max latency in ms) from tbench's last line, e.g.
/// "Throughput 206.345 MB/sec  2 clients  2 procs  max_latency=124.663 ms".
fn parse(out: &str) -> Result<(f64, f64)> {
    if let Some(l) = out.lines().find(|l| l.contains("FAILED TO START")) {
        bail!("tbench: {}", l.trim());
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with("Throughput "))
        .with_context(|| format!("no 'Throughput' line in tbench's output: {out:?}"))?;
    let mbps = number_before(line, "MB/sec");
    let lat = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("max_latency="))
        .and_then(|v| v.parse::<f64>().ok());
    match (mbps, lat) {
        (Some(m), Some(l)) if m > 0.0 => Ok((m, l)),
        (Some(_), Some(_)) => bail!("tbench: no throughput ({})", line.trim()),
        _ => bail!("tbench: cannot read '{}'", line.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dbench 4.0's tbench, 2 clients for 3 s, captured (operation table cut).
    const OUT: &str = "dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 3 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
failed to create barrier semaphore 
0 of 2 processes prepared for launch   0 sec
2 of 2 processes prepared for launch   0 sec
releasing clients
   2     12060   151.40 MB/sec  execute   1 sec  latency 124.663 ms
   2     36956   206.34 MB/sec  execute   2 sec  latency 16.651 ms
   2  cleanup   3 sec
   0  cleanup   3 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX      16340     0.060    60.473
 ReadX          25529     0.054    12.064

Throughput 206.345 MB/sec  2 clients  2 procs  max_latency=124.663 ms
";

    /// The same without a server: success status, but nothing ran.
    const NO_SERVER: &str = "failed to connect to 127.0.0.1 - Connection refused
client 0 failed to start
-1 of 1 processes prepared for launch  30 sec
FAILED TO START 1 CLIENTS (started -1)
Throughput 0 MB/sec  1 clients  1 procs  max_latency=0.000 ms
";

    #[test]
    fn parses_throughput_and_latency() {
        assert_eq!(parse(OUT).unwrap(), (206.345, 124.663));
        let e = parse(NO_SERVER).unwrap_err().to_string();
        assert_eq!(e, "tbench: FAILED TO START 1 CLIENTS (started -1)");
        let e = parse("Throughput 0 MB/sec  1 clients  1 procs  max_latency=0.000 ms")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no throughput"), "{e}");
        assert!(parse("dbench version 4.00\n").is_err());
    }

    #[test]
    fn reads_proc_net_tcp() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1B5B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1B5C 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";
        assert!(listens_in(t, 7003));
        // 7004 is an established connection, not a listener.
        assert!(!listens_in(t, 7004));
        assert!(!listens_in("header only\n", 7003));
    }

    #[test]
    fn dbench_tbench_tiny() {
        // tiny() has secs 0.3: tbench runs its minimum, 2 s.
        let m = crate::workloads::tests::check("dbench-tbench", 2);
        assert!(m["throughput"] > 0.0);
    }
}
