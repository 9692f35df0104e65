//! Worker threads joined against a deadline.

use anyhow::{anyhow, bail, Result};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Threads whose results are collected against a deadline: std's join has no
/// timeout, so each thread reports over a channel and `join` stops waiting at
/// the deadline (the sample then fails instead of hanging).
pub(crate) struct Crew<T> {
    tx: mpsc::Sender<(usize, std::thread::Result<T>)>,
    rx: mpsc::Receiver<(usize, std::thread::Result<T>)>,
    handles: Vec<JoinHandle<()>>,
}

impl<T: Send + 'static> Crew<T> {
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel();
        Crew {
            tx,
            rx,
            handles: Vec::new(),
        }
    }

    pub fn spawn(&mut self, f: impl FnOnce() -> T + Send + 'static) -> Result<()> {
        let (i, tx) = (self.handles.len(), self.tx.clone());
        let h = std::thread::Builder::new()
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                let _ = tx.send((i, r));
            })
            .map_err(|e| anyhow!("cannot start thread {i}: {e}"))?;
        self.handles.push(h);
        Ok(())
    }

    /// Every thread's result in spawn order, or an error at the first panic
    /// or at `deadline`.
    pub fn join(self, deadline: Instant, what: &str) -> Result<Vec<T>> {
        let mut out: Vec<Option<T>> = self.handles.iter().map(|_| None).collect();
        for _ in 0..out.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((i, Ok(v))) => out[i] = Some(v),
                Ok((i, Err(p))) => {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    bail!("{what}: thread {i} panicked: {msg}");
                }
                Err(_) => bail!("{what}: threads still running at the deadline"),
            }
        }
        for h in self.handles {
            let _ = h.join();
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("every thread reported"))
            .collect())
    }
}
