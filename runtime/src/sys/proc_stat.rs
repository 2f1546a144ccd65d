//! A process's `/proc/<pid>/stat`, read as the kernel writes it: its state
//! and when it started. A pid alone does not name a process for long: once
//! the process is reaped the kernel may give its pid to another, and only
//! the start time tells them apart (runc keeps it in its state for that).

/// The fields we read of one process's stat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z`, `X`, …
    pub state: char,
    /// Clock ticks after boot at which the process started (field 22).
    pub start_time: u64,
}

impl ProcStat {
    /// Running or sleeping: not a zombie nobody has reaped yet, nor dead.
    pub fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// `pid`'s stat, or None once no process has that pid.
pub fn read(pid: i32) -> Option<ProcStat> {
    parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `pid` is a live process (a zombie counts as dead).
pub fn alive(pid: i32) -> bool {
    read(pid).is_some_and(|s| s.alive())
}

/// The command name is in parentheses and may hold spaces and `)`: the
/// fields start after the last `)`.
fn parse(line: &str) -> Option<ProcStat> {
    let (_, rest) = line.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3), the start time is field 22.
    let start_time = fields.nth(22 - 4)?.parse().ok()?;
    Some(ProcStat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_and_start_time_after_the_last_parenthesis() {
        let line = "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 97 0 0 0 0 0 0 0 20 0 1 0 987654 2367488 177 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(parse(line), Some(ProcStat { state: 'S', start_time: 987654 }));
        assert!(parse("4242 (true) Z 1 2").is_none(), "a short line has no start time");
    }

    #[test]
    fn this_process_is_alive_and_started_before_now() {
        let me = read(std::process::id() as i32).expect("our own stat");
        assert!(me.alive());
        assert!(me.start_time > 0);
        let again = read(std::process::id() as i32).expect("our own stat again");
        assert_eq!(again.start_time, me.start_time, "the start time does not change (the state may)");
    }
}
