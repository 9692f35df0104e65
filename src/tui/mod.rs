//! `scx_nimble tui`: a terminal UI over a running scheduler's metrics, read
//! from its scx_stats socket like `--monitor` does. It samples once per
//! interval and redraws only when a sample, a key or a resize arrives, so it
//! costs the machine it watches next to nothing.

pub mod ui;

use crate::stats::Metrics;
use anyhow::{anyhow, bail, Context, Result};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use scx_stats::prelude::StatsClient;
use std::io::IsTerminal;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ui::History;

/// Where the scheduler serves its metrics (root only).
pub const SOCKET: &str = "/var/run/scx/root/stats";

/// How long a request may wait for its answer: the scheduler answers within
/// ~100 ms; one that stays silent this long is gone or wedged.
const TIMEOUT_MS: u64 = 3000;

/// Longest wait for a key, so SIGTERM/SIGHUP are noticed promptly.
const MAX_POLL: Duration = Duration::from_millis(250);

pub struct TuiArgs {
    pub interval: Duration,
}

/// Why the event loop ended.
#[derive(Debug, PartialEq)]
enum End {
    Quit,
    Gone(String),
}

/// Test hook: the host tests point the TUI at a socket path that does not
/// exist, so the "no scheduler" case runs whatever the host has.
pub const SOCKET_ENV: &str = "SCX_NIMBLE_TEST_STATS_SOCKET";

pub fn run(args: &TuiArgs) -> Result<()> {
    // Everything that can fail for ordinary reasons is checked before the
    // terminal is switched, so its message lands on a normal screen.
    let socket = std::env::var_os(SOCKET_ENV).map_or_else(|| SOCKET.into(), PathBuf::from);
    let mut client = connect(&socket)?;
    let at = socket.display();
    let first = fetch(&mut client).map_err(|e| match e {
        FetchError::Gone(e) => anyhow!("the stats server at {at} did not answer: {e:#}"),
        FetchError::Bad(e) => e.context(format!("{at} serves no scx_nimble metrics")),
    })?;
    if !std::io::stdout().is_terminal() {
        bail!("scx_nimble tui needs a terminal on stdout");
    }
    let mut hist = History::new(args.interval);
    hist.push(first);

    // In raw mode Ctrl-C is a key; this catches SIGTERM and SIGHUP (terminal
    // closed) so the terminal is still restored. Fails only if a handler
    // exists already, which then is the caller's business.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));

    // try_init installs a panic hook that restores the terminal; the guard
    // restores it on every other way out, errors included.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            ratatui::restore();
        }
    }
    let guard = Restore;
    let mut term = ratatui::try_init().context("setting up the terminal")?;
    let end = event_loop(
        &mut client,
        &mut hist,
        &stop,
        |h| {
            term.draw(|f| ui::draw(f, h))?;
            Ok(())
        },
        |timeout| {
            Ok(if event::poll(timeout)? {
                Some(event::read()?)
            } else {
                None
            })
        },
    );
    // The terminal's own drop writes (shows the cursor): before restoring.
    drop(term);
    drop(guard);
    if let End::Gone(why) = end? {
        eprintln!("scx_nimble tui: the scheduler went away ({why})");
    }
    Ok(())
}

fn connect(path: &Path) -> Result<StatsClient> {
    StatsClient::new()
        .set_path(path)
        .connect(Some(TIMEOUT_MS))
        .map_err(|e| {
            anyhow!(
                "no scx_nimble stats server at {}: {e} (is the scheduler running? root only)",
                path.display()
            )
        })
}

/// A failed request: the server went away, or it answered something that
/// is not scx_nimble's Metrics (another scheduler, another version).
#[derive(Debug)]
enum FetchError {
    Gone(anyhow::Error),
    Bad(anyhow::Error),
}

fn fetch(client: &mut StatsClient) -> std::result::Result<Metrics, FetchError> {
    client.request::<Metrics>("stats", vec![]).map_err(|e| {
        // EOF, reset, broken pipe, timeouts and error answers of a server
        // shutting down all mean it is leaving; only a well-formed answer of
        // the wrong shape is a real error.
        match e.downcast_ref::<serde_json::Error>() {
            Some(j) if j.is_data() => FetchError::Bad(e),
            _ => FetchError::Gone(e),
        }
    })
}

fn is_quit(k: &KeyEvent) -> bool {
    k.kind != KeyEventKind::Release
        && match k.code {
            KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// Samples every `hist.interval` and draws when something changed, until a
/// quit key, a stop signal or the server going away. `next_event(t)` waits
/// up to `t` for a terminal event (crossterm's poll+read; a script in tests).
fn event_loop(
    client: &mut StatsClient,
    hist: &mut History,
    stop: &AtomicBool,
    mut draw: impl FnMut(&History) -> Result<()>,
    mut next_event: impl FnMut(Duration) -> Result<Option<Event>>,
) -> Result<End> {
    let interval = hist.interval;
    let mut next = Instant::now() + interval;
    let mut dirty = true;
    while !stop.load(Ordering::Relaxed) {
        if dirty {
            draw(hist)?;
            dirty = false;
        }
        let now = Instant::now();
        if now >= next {
            match fetch(client) {
                Ok(m) => hist.push(m),
                Err(FetchError::Gone(e)) => return Ok(End::Gone(format!("{e:#}"))),
                Err(FetchError::Bad(e)) => return Err(e.context(format!("reading {SOCKET}"))),
            }
            dirty = true;
            // Fixed cadence; after a stall start afresh rather than catch up.
            next += interval;
            if next <= now {
                next = now + interval;
            }
            continue;
        }
        match next_event((next - now).min(MAX_POLL))? {
            Some(Event::Key(k)) if is_quit(&k) => return Ok(End::Quit),
            Some(Event::Resize(..)) => dirty = true,
            _ => {}
        }
    }
    Ok(End::Quit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEvent;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    fn sock(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("nimble-tui-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// A stats server that answers one request per reply, then hangs up
    /// (the scheduler exiting).
    fn serve(path: &Path, replies: Vec<String>) -> std::thread::JoinHandle<()> {
        let listener = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            for reply in replies {
                let mut req = String::new();
                r.read_line(&mut req).unwrap();
                assert!(req.contains(r#""req":"stats""#), "{req}");
                writeln!(w, r#"{{"errno":0,"args":{{"resp":{reply}}}}}"#).unwrap();
            }
        })
    }

    fn recorded() -> Vec<String> {
        ui::tests::N2L4
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(String::from)
            .collect()
    }

    #[test]
    fn no_server_is_an_error_naming_the_socket() {
        let p = sock("none");
        let e = connect(&p)
            .err()
            .expect("nothing listens there")
            .to_string();
        assert!(
            e.starts_with(&format!("no scx_nimble stats server at {}: ", p.display())),
            "{e}"
        );
        assert!(e.ends_with("(is the scheduler running? root only)"), "{e}");
    }

    #[test]
    fn samples_until_the_server_goes_away() {
        let p = sock("gone");
        let snaps = recorded();
        let server = serve(&p, snaps.clone());
        let mut client = connect(&p).unwrap();
        let mut hist = History::new(Duration::from_millis(20));
        hist.push(fetch(&mut client).unwrap());
        let (mut draws, mut waits) = (0, 0);
        let stop = AtomicBool::new(false);
        let end = event_loop(
            &mut client,
            &mut hist,
            &stop,
            |_| {
                draws += 1;
                Ok(())
            },
            |t| {
                waits += 1;
                std::thread::sleep(t);
                Ok(None)
            },
        )
        .unwrap();
        server.join().unwrap();
        assert!(matches!(end, End::Gone(_)), "{end:?}");
        // One draw per sample, none while idle.
        assert_eq!(draws, snaps.len());
        assert_eq!(hist.rates().len(), snaps.len() - 1);
        assert!(waits >= snaps.len() - 1);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn keys_quit_and_resize_redraws() {
        let p = sock("keys");
        let server = serve(&p, recorded()[..1].to_vec());
        let mut client = connect(&p).unwrap();
        let mut hist = History::new(Duration::from_secs(60));
        hist.push(fetch(&mut client).unwrap());
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for quit in [
            KeyEvent::from(KeyCode::Char('q')),
            KeyEvent::from(KeyCode::Esc),
            ctrl_c,
        ] {
            let mut script = vec![
                Event::Resize(100, 40),
                Event::Key(KeyCode::Char('x').into()),
                Event::Key(KeyCode::Char('c').into()),
                Event::Key(quit),
            ]
            .into_iter();
            let mut draws = 0;
            let stop = AtomicBool::new(false);
            let end = event_loop(
                &mut client,
                &mut hist,
                &stop,
                |_| {
                    draws += 1;
                    Ok(())
                },
                |_| Ok(script.next()),
            );
            assert_eq!(end.unwrap(), End::Quit);
            assert_eq!(draws, 2, "first frame and the resize");
        }
        let stop = AtomicBool::new(true);
        let end = event_loop(&mut client, &mut hist, &stop, |_| Ok(()), |_| Ok(None));
        assert_eq!(end.unwrap(), End::Quit);
        drop(client);
        server.join().unwrap();
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn wrong_shape_is_an_error_not_a_goodbye() {
        let p = sock("bad");
        let server = serve(&p, vec![r#"{"sched":"scx_other"}"#.into()]);
        let mut client = connect(&p).unwrap();
        assert!(matches!(fetch(&mut client), Err(FetchError::Bad(_))));
        drop(client);
        server.join().unwrap();
        let _ = std::fs::remove_file(&p);
    }
}
