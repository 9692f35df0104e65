//! Bad input is one line, in scx_nimble and nimble-lab alike: clap's first
//! line says what is wrong, the indented lines after it list what is
//! missing; the usage that follows is dropped.

pub fn clap_error_line(e: &clap::Error) -> String {
    let msg = e.to_string();
    let mut lines = msg.lines();
    let mut first = lines.next().unwrap_or("invalid arguments").to_string();
    for l in lines.take_while(|l| l.starts_with("  ")) {
        first = format!("{first} {}", l.trim());
    }
    first
}
