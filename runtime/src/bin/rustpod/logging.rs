//! runc's logging conventions: `--log FILE` and `--log-format text|json`,
//! with JSON lines of `level`, `msg` and `time` that containerd reads back.

use std::fmt;
use std::fs::OpenOptions;
use std::path::Path;

use anyhow::{Context, Result};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Sends logs to `file` (or stderr with `--debug` and no file). Without
/// either, nothing is logged: the CLI's own one-line error is all the user
/// sees on stderr.
pub fn init(file: Option<&Path>, format: LogFormat, debug: bool) -> Result<()> {
    let level = if debug { Level::DEBUG } else { Level::WARN };
    let formatter = RuncFormat { format };
    let builder = tracing_subscriber::fmt().with_max_level(level).event_format(formatter);
    match file {
        Some(path) => {
            let log =
                OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("open log file {}", path.display()))?;
            builder.with_writer(std::sync::Mutex::new(log)).init();
        }
        None if debug => builder.with_writer(std::io::stderr).init(),
        None => {}
    }
    Ok(())
}

struct RuncFormat {
    format: LogFormat,
}

#[derive(Default)]
struct Message {
    msg: String,
    fields: Vec<(String, String)>,
}

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.msg = format!("{value:?}");
        } else {
            self.fields.push((field.name().to_string(), format!("{value:?}")));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg = value.to_string();
        } else {
            self.fields.push((field.name().to_string(), value.to_string()));
        }
    }
}

impl<S, N> FormatEvent<S, N> for RuncFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut message = Message::default();
        event.record(&mut message);
        writeln!(w, "{}", entry(self.format, logrus_level(event.metadata().level()), message.msg, message.fields))
    }
}

/// logrus's name for `level`: `warning`, not tracing's `warn`.
fn logrus_level(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// One log entry in runc's (logrus's) shape: `time="…" level=… msg="…"`,
/// or a JSON object of `level`, `msg` and `time`.
pub fn entry(format: LogFormat, level: &str, msg: String, fields: Vec<(String, String)>) -> String {
    let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match format {
        LogFormat::Json => {
            let mut obj = serde_json::Map::new();
            obj.insert("level".into(), level.into());
            obj.insert("msg".into(), msg.into());
            obj.insert("time".into(), time.into());
            for (k, v) in fields {
                obj.insert(k, v.into());
            }
            serde_json::Value::Object(obj).to_string()
        }
        LogFormat::Text => {
            let mut line = format!("time=\"{time}\" level={level} msg={msg:?}");
            for (k, v) in fields {
                line.push_str(&format!(" {k}={v:?}"));
            }
            line
        }
    }
}
