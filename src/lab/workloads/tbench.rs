//! The lab's own tbench-style loopback throughput (not dbench's tbench: that
//! is the `dbench-tbench` workload): CLIENTS TCP clients each do 256-byte
//! request / 1024-byte reply round trips against a thread-per-connection
//! server on 127.0.0.1, so every round trip is two cross-thread wakeups.

use super::{higher, pow2_upto, Crew, Opts, Spec};
use anyhow::{bail, Context, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "tbench",
    param: "clients",
    about: "own TCP ping-pong, not dbench's tbench: CLIENTS clients, 256 B / 1 KiB round trips",
    metrics: &[
        higher("throughput", "records/s"),
        higher("mb_per_s", "MB/s"),
    ],
    default_points: |n| pow2_upto(2 * n),
};

const REQ: usize = 256;
const REPLY: usize = 1024;
/// No socket operation may block longer than this (a stuck peer ends the
/// sample with an error rather than hanging it).
const IO_TIMEOUT: Duration = Duration::from_secs(10);

fn setup(s: &TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))
}

/// Answers every request on `s` until the client closes it.
fn serve(mut s: TcpStream) -> Result<()> {
    setup(&s)?;
    let (mut req, reply) = ([0u8; REQ], [0x5au8; REPLY]);
    loop {
        match s.read_exact(&mut req) {
            Ok(()) => s.write_all(&reply).context("server write")?,
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => bail!("server read: {e}"),
        }
    }
}

/// Round trips until `deadline`; returns how many.
fn client(port: u16, deadline: Instant) -> Result<u64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).context("connect")?;
    setup(&s)?;
    let (req, mut reply) = ([0xa5u8; REQ], [0u8; REPLY]);
    let mut n = 0u64;
    while Instant::now() < deadline {
        s.write_all(&req).context("client write")?;
        s.read_exact(&mut reply).context("client read")?;
        n += 1;
    }
    Ok(n)
}

pub fn run(clients: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("tbench: bind 127.0.0.1")?;
    let port = listener.local_addr()?.port();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(opts.secs.max(0.01));
    let mut cl = Crew::new();
    for _ in 0..clients {
        cl.spawn(move || client(port, deadline))?;
    }
    // Accept without blocking forever: a client that failed to connect must
    // not leave us waiting for it.
    listener.set_nonblocking(true)?;
    let mut srv = Crew::new();
    let accept_by = t0 + IO_TIMEOUT;
    let mut accepted = 0;
    while accepted < clients {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                srv.spawn(move || serve(s))?;
                accepted += 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < accept_by => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                bail!("tbench: only {accepted} of {clients} clients connected")
            }
            Err(e) => bail!("tbench: accept: {e}"),
        }
    }
    let end = deadline + 2 * IO_TIMEOUT;
    let counts = cl.join(end, "tbench clients")?;
    let elapsed = t0.elapsed().as_secs_f64();
    let mut total = 0u64;
    for c in counts {
        total += c.context("tbench client")?;
    }
    for r in srv.join(end, "tbench server")? {
        r.context("tbench server")?;
    }
    if total == 0 {
        bail!("tbench: no round trips completed");
    }
    let rate = total as f64 / elapsed;
    Ok(vec![
        ("throughput".into(), rate),
        ("mb_per_s".into(), rate * (REQ + REPLY) as f64 / 1e6),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn tbench_tiny() {
        let m = crate::workloads::tests::check("tbench", 2);
        assert!(m["throughput"] > 0.0 && m["mb_per_s"] > 0.0);
    }
}
