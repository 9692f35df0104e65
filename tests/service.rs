//! The systemd unit (dist/scx_nimble.service) and its flags file: the unit
//! passes `systemd-analyze verify` (pointed at the built binary, since
//! verify checks that ExecStart exists), reads its flags from
//! /etc/default/scx_nimble, and install.sh refuses what it does not know.

use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../dist/scx_nimble.service");
const DEFAULTS: &str = include_str!("../dist/scx_nimble.default");

fn verify(unit: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scx_nimble.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (package systemd; vm/nimble-vm deps installs it)");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), err)
}

#[test]
fn unit_verifies() {
    let bin = env!("CARGO_BIN_EXE_scx_nimble");
    assert!(UNIT.contains("ExecStart=/usr/local/bin/scx_nimble $SCX_NIMBLE_FLAGS"));
    let unit = UNIT.replace("/usr/local/bin/scx_nimble", bin);
    let (ok, err) = verify(&unit);
    // Any message (an unknown key, a key in the wrong section) is a defect.
    assert!(ok && err.trim().is_empty(), "systemd-analyze verify: {err}");
    // And the check bites: a misspelt key is reported.
    let (_, err) = verify(&unit.replace("KillSignal=", "KillSignl="));
    assert!(err.contains("KillSignl"), "verify missed a bad key: {err}");
}

#[test]
fn unit_reads_flags_and_conflicts_with_other_loaders() {
    assert!(UNIT.contains("EnvironmentFile=-/etc/default/scx_nimble"));
    assert!(UNIT.contains("Conflicts=scx.service scx_loader.service"));
    assert!(UNIT.contains("KillSignal=SIGINT"));
    let flags: Vec<&str> = DEFAULTS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(flags, ["SCX_NIMBLE_FLAGS=\"\""], "{DEFAULTS}");
    // The example in the flags file is accepted by the binary's parser.
    let example = DEFAULTS
        .lines()
        .find_map(|l| l.strip_prefix("#   SCX_NIMBLE_FLAGS=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("an example line");
    let out = Command::new(env!("CARGO_BIN_EXE_scx_nimble"))
        .args(example.split_whitespace())
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{example}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn install_refuses_bad_options_in_one_line() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/install.sh");
    for (args, want) in [
        (&["--bogus"][..], "unknown option --bogus"),
        (&["--prefix"][..], "--prefix needs a directory"),
        (&["--prefix", "opt"][..], "must be an absolute path"),
        (&["--prefix", "/opt/a|b"][..], "characters"),
    ] {
        let out = Command::new("sh").arg(&script).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
