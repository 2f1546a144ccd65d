//! The shim's log: lines to the `log` FIFO containerd reads in the bundle,
//! opened read-write and non-blocking so a full FIFO (containerd down) drops
//! lines instead of stalling the shim. The engine's warnings and errors
//! (`tracing`, e.g. a failed poststart hook) go there too.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Whether the current containerd outage was already logged.
static OUTAGE_TOLD: AtomicBool = AtomicBool::new(false);

/// Logs, at info and once until [`containerd_back`], that containerd went
/// away (it restarts, or crashed): replies and events wait for it.
pub fn containerd_gone(what: &dyn std::fmt::Display) {
    if !OUTAGE_TOLD.swap(true, Ordering::Relaxed) {
        log::info!("containerd closed its connection ({what}); waiting for it to reconnect");
    }
}

/// containerd answers again: its next outage is logged again.
pub fn containerd_back() {
    if OUTAGE_TOLD.swap(false, Ordering::Relaxed) {
        log::info!("containerd is back");
    }
}

/// ttrpc's server logs an error for every reply it cannot send, and one
/// goes unsent for each request in flight when containerd stops (a Wait
/// above all); containerd asks again once it is back.
fn is_containerd_gone(record: &log::Record) -> bool {
    record.target().starts_with("ttrpc") && {
        let text = record.args().to_string();
        ["EPIPE", "ECONNRESET", "Broken pipe", "Connection reset"].iter().any(|word| text.contains(word))
    }
}

struct FifoLogger {
    file: Mutex<File>,
}

impl log::Log for FifoLogger {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        if is_containerd_gone(record) {
            return containerd_gone(record.args());
        }
        let line = format!(
            "time=\"{}\" level={} msg=\"{}\" runtime={}\n",
            now_rfc3339(),
            record.level().as_str().to_lowercase(),
            record.args().to_string().replace('"', "\\\""),
            crate::RUNTIME_ID
        );
        if let Ok(mut file) = self.file.lock() {
            let _ = file.write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger if `./log` can be opened; `debug` lowers the level.
pub fn init(debug: bool) {
    init_in(std::path::Path::new(""), debug)
}

/// Installs the logger on the `log` FIFO in `dir` (a create helper: its container's bundle,
/// whose FIFO containerd reads).
pub fn init_in(dir: &std::path::Path, debug: bool) {
    let Ok(file) = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(dir.join("log")) else {
        return;
    };
    let logger = FifoLogger { file: Mutex::new(file) };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(if debug { log::LevelFilter::Debug } else { log::LevelFilter::Info });
        let _ = tracing::subscriber::set_global_default(EngineEvents);
    }
}

/// Passes the runtime's and the engine's `tracing` warnings and errors to our
/// log, with their fields; spans and anything quieter are dropped (no
/// registry needed).
struct EngineEvents;

impl tracing::Subscriber for EngineEvents {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        // Not libcgroups: it warns of every controller the host lacks on
        // each Stats call.
        let ours = ["rustpod", "libcontainer"].iter().any(|krate| meta.target().starts_with(krate));
        ours && meta.is_event() && *meta.level() <= tracing::Level::WARN
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = EventText::default();
        event.record(&mut text);
        let level = if *event.metadata().level() == tracing::Level::ERROR { log::Level::Error } else { log::Level::Warn };
        log::log!(level, "{}{}", text.message, text.fields);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[derive(Default)]
struct EventText {
    message: String,
    fields: String,
}

impl tracing::field::Visit for EventText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

/// Seconds since the epoch with nanoseconds, formatted without a date
/// library: good enough for containerd's logrus parser (it keeps the text).
fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z", rem / 3600, rem % 3600 / 60, rem % 60, now.subsec_nanos())
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(19_723), (2024, 1, 1));
    }
}
