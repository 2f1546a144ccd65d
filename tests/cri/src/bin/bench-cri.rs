//! Benchmark driver of hack/bench-cri: pod start (RunPodSandbox + CreateContainer +
//! StartContainer) and ExecSync latency through containerd's CRI, handler `rustpod` vs `runc`;
//! and how soon ContainerStatus shows what a call or an exit did, which a poller such as
//! critest (once a second) pays for in whole intervals.

use rustpod_cri_tests::cri::ContainerState;
use rustpod_cri_tests::{blocker, container, pod_config, sleeper, Cri};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const HANDLERS: [&str; 2] = ["rustpod", "runc"];
const USAGE: &str = "usage: bench-cri [--pairs N] [--execs M] [--out FILE.json] [--md FILE.md] \
                     [--calls FILE.tsv]\n\
                     --calls: each call's handler, pod, name and start/end (Unix seconds), to \
                     line up with containerd's log or an strace";

/// Set by SIGINT/SIGTERM: the run stops after the current call and still cleans up.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

struct Args {
    pairs: usize,
    execs: usize,
    out: Option<String>,
    md: Option<String>,
    calls: Option<String>,
}

/// One handler's samples, in milliseconds.
#[derive(Default)]
struct Samples {
    run_pod: Vec<f64>,
    create: Vec<f64>,
    start: Vec<f64>,
    pod_start: Vec<f64>,
    exec: Vec<f64>,
    /// From StartContainer's return to the first ContainerStatus that says RUNNING.
    running_seen: Vec<f64>,
    /// From a process's exit (the status's finished_at) to the first ContainerStatus that
    /// says EXITED, polled every millisecond.
    exited_seen: Vec<f64>,
    /// StopContainer of a sleeper that dies of the TERM.
    stop: Vec<f64>,
    /// StopContainer calls after which ContainerStatus did not say EXITED yet.
    stop_lagged: usize,
    /// From StartContainer's call to a busybox httpd in the container accepting a connection.
    server_ready: Vec<f64>,
    /// Of those, the ones that accepted at the first try, made as StartContainer returned:
    /// critest's first probe of a web server, whose miss costs its 1 s poll interval.
    server_ready_at_return: usize,
}

/// One row of the result table: a figure, how to get its samples, and its goal if it has one.
struct Figure {
    key: &'static str,
    label: &'static str,
    samples: fn(&Samples) -> &Vec<f64>,
    goal: Option<f64>,
}

const FIGURES: [Figure; 9] = [
    Figure {
        key: "pod_start",
        label: "pod start: RunPodSandbox + CreateContainer + StartContainer",
        samples: |s| &s.pod_start,
        goal: Some(0.6),
    },
    Figure { key: "run_pod", label: "↳ RunPodSandbox", samples: |s| &s.run_pod, goal: None },
    Figure { key: "create", label: "↳ CreateContainer", samples: |s| &s.create, goal: None },
    Figure { key: "start", label: "↳ StartContainer", samples: |s| &s.start, goal: None },
    Figure { key: "exec", label: "ExecSync `true`", samples: |s| &s.exec, goal: Some(0.5) },
    Figure { key: "running_seen", label: "StartContainer return → RUNNING in ContainerStatus", samples: |s| &s.running_seen, goal: None },
    Figure { key: "exited_seen", label: "process exit → EXITED in ContainerStatus", samples: |s| &s.exited_seen, goal: None },
    Figure { key: "stop", label: "StopContainer (dies of TERM)", samples: |s| &s.stop, goal: None },
    Figure { key: "server_ready", label: "StartContainer call → httpd in it accepts", samples: |s| &s.server_ready, goal: None },
];

/// How often the state figures poll ContainerStatus.
const STATE_POLL: Duration = Duration::from_millis(1);
/// A state that takes longer than this to show is an error, not a sample.
const STATE_LIMIT: Duration = Duration::from_secs(30);

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => fail(&e),
    };
    if let Err(e) = run(&args) {
        fail(&e);
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("bench-cri: {msg}");
    std::process::exit(1);
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args { pairs: 30, execs: 5, out: None, md: None, calls: None };
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let count = || match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{flag} wants a positive number, got '{value}'")),
        };
        match flag.as_str() {
            "--pairs" => args.pairs = count()?,
            "--execs" => args.execs = count()?,
            "--out" => args.out = Some(value),
            "--md" => args.md = Some(value),
            "--calls" => args.calls = Some(value),
            _ => return Err(format!("unknown argument '{flag}'\n{USAGE}")),
        }
    }
    Ok(args)
}

fn run(args: &Args) -> Result<(), String> {
    if let Some(why) = blocker() {
        return Err(format!("cannot run: {why}"));
    }
    let shim = rustpod_tests::shim::shim_bin();
    if !shim.exists() {
        return Err(format!("no shim at {} (set RUSTPOD_SHIM_BIN)", shim.display()));
    }
    catch_signals()?;
    let began = Instant::now();
    let cri = Cri::try_start()?;
    eprintln!("bench-cri: containerd with CRI up in {}", cri.dir().display());
    let mut bench = Bench { cri: &cri, execs: args.execs, calls: Vec::new() };
    let samples = bench.measure(args.pairs)?;
    let calls = bench.calls;
    drop(cri);
    report(args, began.elapsed(), &samples, &calls)
}

/// Prints the table and writes the files asked for.
fn report(args: &Args, elapsed: Duration, samples: &[Samples; 2], calls: &[String]) -> Result<(), String> {
    let meta = metadata(args, elapsed);
    let md = markdown(&meta, samples);
    print!("{md}");
    if let Some(path) = &args.md {
        write(path, &md)?;
    }
    if let Some(path) = &args.calls {
        write(path, &(calls.join("\n") + "\n"))?;
    }
    if let Some(path) = &args.out {
        let doc = report_json(meta, samples);
        write(path, &(serde_json::to_string_pretty(&doc).expect("JSON") + "\n"))?;
    }
    Ok(())
}

fn write(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("write {path}: {e}"))
}

extern "C" fn on_signal(_: nix::libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT and SIGTERM end the run early but through Cri's Drop, which removes every pod and
/// stops containerd (a plain kill would leave them running: containerd runs in its own session).
fn catch_signals() -> Result<(), String> {
    use nix::sys::signal::{signal, SigHandler, Signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { signal(sig, SigHandler::Handler(on_signal)) }.map_err(|e| format!("install a {sig} handler: {e}"))?;
    }
    Ok(())
}

fn check_interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("interrupted; pods removed and containerd stopped".into());
    }
    Ok(())
}

/// A run's CRI calls, each timed.
struct Bench<'a> {
    cri: &'a Cri,
    execs: usize,
    /// `handler pod call start end` (Unix seconds) of every call, for `--calls`.
    calls: Vec<String>,
}

impl Bench<'_> {
    /// Runs one CRI call: its result and wall time in ms.
    fn timed<T>(
        &mut self,
        (handler, pod, call): (&str, &str, &str),
        f: impl FnOnce(&Cri) -> Result<T, tonic::Status>,
    ) -> Result<(T, f64), String> {
        check_interrupted()?;
        let wall = SystemTime::now();
        let t = Instant::now();
        let r = f(self.cri);
        let took = t.elapsed();
        let r = r.map_err(|e| format!("{call} ({handler}, {pod}): {e}"))?;
        let start = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        self.calls.push(format!("{handler}\t{pod}\t{call}\t{:.6}\t{:.6}", start.as_secs_f64(), (start + took).as_secs_f64()));
        Ok((r, ms(took)))
    }

    /// One pod with one sleeper container on `handler`: the pod start calls, then `execs`
    /// ExecSync calls, then stop and remove (not sampled).
    fn one_pod(&mut self, handler: &str, name: &str, into: &mut Samples) -> Result<(), String> {
        let tag = |call: &'static str| (handler, name, call);
        let pod_cfg = pod_config(&format!("bench-{handler}-{name}"));
        let ctr_cfg = sleeper("sleeper");
        let (pod, run) = self.timed(tag("RunPodSandbox"), |c| c.run_pod_with(&pod_cfg, handler))?;
        let (ctr, create) = self.timed(tag("CreateContainer"), |c| c.create_container(&pod, &ctr_cfg, &pod_cfg))?;
        let ((), start) = self.timed(tag("StartContainer"), |c| c.start_container(&ctr))?;
        let since_return = Instant::now();
        self.poll_state(&ctr, ContainerState::ContainerRunning)?;
        into.running_seen.push(ms(since_return.elapsed()));
        into.run_pod.push(run);
        into.create.push(create);
        into.start.push(start);
        into.pod_start.push(run + create + start);
        for _ in 0..self.execs {
            let (r, exec) = self.timed(tag("ExecSync"), |c| c.exec_sync(&ctr, &["true"]))?;
            into.exec.push(exec);
            if r.exit_code != 0 {
                return Err(format!("ExecSync `true` ({handler}, {name}) exited {}", r.exit_code));
            }
        }
        let ((), stop) = self.timed(tag("StopContainer"), |c| c.stop_container(&ctr, 10))?;
        into.stop.push(stop);
        if self.state(&ctr)? != ContainerState::ContainerExited {
            into.stop_lagged += 1;
        }
        into.exited_seen.push(self.exit_lag((handler, name), &pod, &pod_cfg)?);
        self.server_ready((handler, name), &pod, &pod_cfg, into)?;
        self.timed(tag("StopPodSandbox"), |c| c.stop_pod(&pod))?;
        self.timed(tag("RemovePodSandbox"), |c| c.remove_pod(&pod))?;
        Ok(())
    }

    fn state(&self, id: &str) -> Result<ContainerState, String> {
        let status = self.cri.container_status(id).map_err(|e| format!("ContainerStatus {id}: {e}"))?;
        let state = status.status.map_or(0, |s| s.state);
        ContainerState::try_from(state).map_err(|e| format!("ContainerStatus {id}: {e}"))
    }

    /// Polls ContainerStatus every `STATE_POLL` until container `id` is in `state`.
    fn poll_state(&self, id: &str, state: ContainerState) -> Result<(), String> {
        let began = Instant::now();
        while self.state(id)? != state {
            if began.elapsed() > STATE_LIMIT {
                return Err(format!("container {id} not {state:?} after {STATE_LIMIT:?}"));
            }
            std::thread::sleep(STATE_POLL);
        }
        Ok(())
    }

    /// Starts a container that exits at once and returns how long after its exit (as its
    /// status's finished_at has it) ContainerStatus first said EXITED, in ms.
    fn exit_lag(
        &mut self,
        (handler, name): (&str, &str),
        pod: &str,
        pod_cfg: &rustpod_cri_tests::cri::PodSandboxConfig,
    ) -> Result<f64, String> {
        let cfg = container("exiter", "exit 0");
        let tag = |call: &'static str| (handler, name, call);
        let (id, _) = self.timed(tag("CreateContainer"), |c| c.create_container(pod, &cfg, pod_cfg))?;
        self.timed(tag("StartContainer"), |c| c.start_container(&id))?;
        self.poll_state(&id, ContainerState::ContainerExited)?;
        let seen = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let status = self.cri.container_status(&id).map_err(|e| format!("ContainerStatus {id}: {e}"))?;
        let finished = status.status.map_or(0, |s| s.finished_at);
        Ok((seen.as_nanos() as i64 - finished) as f64 / 1e6)
    }

    /// Starts a busybox httpd on a free port (the pod has the host's network) and records how
    /// long after StartContainer's call it accepted, and whether it did at StartContainer's
    /// return.
    fn server_ready(
        &mut self,
        (handler, name): (&str, &str),
        pod: &str,
        pod_cfg: &rustpod_cri_tests::cri::PodSandboxConfig,
        into: &mut Samples,
    ) -> Result<(), String> {
        let tag = |call: &'static str| (handler, name, call);
        let port = free_port()?;
        let cfg = container("httpd", &format!("exec httpd -f -p 127.0.0.1:{port}"));
        let (id, _) = self.timed(tag("CreateContainer"), |c| c.create_container(pod, &cfg, pod_cfg))?;
        let called = Instant::now();
        self.timed(tag("StartContainer"), |c| c.start_container(&id))?;
        let accepts = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        if accepts() {
            into.server_ready_at_return += 1;
        } else {
            while !accepts() {
                if called.elapsed() > STATE_LIMIT {
                    return Err(format!("httpd ({handler}, {name}) not listening on {port}"));
                }
                std::thread::sleep(STATE_POLL);
            }
        }
        into.server_ready.push(ms(called.elapsed()));
        Ok(())
    }

    /// Warms up each handler once, then runs `pairs` interleaved pairs: rustpod first on even
    /// pairs, runc first on odd ones.
    fn measure(&mut self, pairs: usize) -> Result<[Samples; 2], String> {
        let mut samples = [Samples::default(), Samples::default()];
        for handler in HANDLERS {
            self.one_pod(handler, "warmup", &mut Samples::default())?;
        }
        for pair in 0..pairs {
            let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                self.one_pod(HANDLERS[i], &format!("pair{pair}"), &mut samples[i])?;
            }
            progress(pair + 1, pairs);
        }
        Ok(samples)
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("bind a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("bind a free port: {e}"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `pair n/total`, overwritten in place on a terminal.
fn progress(n: usize, total: usize) {
    if !std::io::stderr().is_terminal() {
        eprintln!("bench-cri: pair {n}/{total}");
        return;
    }
    eprint!("\rbench-cri: pair {n}/{total}");
    if n == total {
        eprintln!();
    }
}

struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
    mean: f64,
    n: usize,
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn stats(samples: &[f64]) -> Stats {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
    Stats { median, p10: percentile(&sorted, 10.0), p90: percentile(&sorted, 90.0), mean: sorted.iter().sum::<f64>() / n as f64, n }
}

/// First line of `program args…`'s stdout, or "?".
fn first_line(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn os_name() -> String {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    release.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map_or_else(|| "?".into(), |v| v.trim_matches('"').to_string())
}

fn metadata(args: &Args, elapsed: Duration) -> Value {
    json!({
        "date": first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        "os": os_name(),
        "kernel": first_line("uname", &["-r"]),
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "containerd": first_line("containerd", &["--version"]),
        "runc": first_line("runc", &["--version"]),
        "shim": rustpod_tests::shim::shim_bin().display().to_string(),
        "pairs": args.pairs,
        "execs_per_pod": args.execs,
        "elapsed_s": (elapsed.as_secs_f64() * 10.0).round() / 10.0,
    })
}

fn stats_json(s: &Stats) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({"median_ms": r(s.median), "p10_ms": r(s.p10), "p90_ms": r(s.p90),
           "mean_ms": r(s.mean), "n": s.n})
}

/// Samples to the microsecond.
fn rounded(samples: &[f64]) -> Vec<f64> {
    samples.iter().map(|x| (x * 1000.0).round() / 1000.0).collect()
}

fn report_json(meta: Value, samples: &[Samples; 2]) -> Value {
    let mut figures = serde_json::Map::new();
    for f in &FIGURES {
        let [a, b] = [0, 1].map(|i| stats((f.samples)(&samples[i])));
        let ratio = a.median / b.median;
        figures.insert(
            f.key.into(),
            json!({
                "label": f.label,
                "rustpod": stats_json(&a),
                "runc": stats_json(&b),
                "ratio_of_medians": (ratio * 1000.0).round() / 1000.0,
                "goal": f.goal,
                "met": f.goal.map(|g| ratio <= g),
                "samples_ms": {
                    "rustpod": rounded((f.samples)(&samples[0])),
                    "runc": rounded((f.samples)(&samples[1])),
                },
            }),
        );
    }
    let [a, b] = [0, 1].map(|i| at_return(&samples[i]));
    json!({"meta": meta, "figures": figures, "at_return": {"rustpod": a, "runc": b}})
}

fn cell(s: &Stats) -> String {
    format!("{:.1} ms ({:.1}–{:.1})", s.median, s.p10, s.p90)
}

fn markdown(meta: &Value, samples: &[Samples; 2]) -> String {
    let m = |k: &str| meta[k].as_str().map_or_else(|| meta[k].to_string(), str::to_string);
    let mut md = format!(
        "Measured {} on {}, kernel {}, {} CPUs; {}, {}. {} interleaved pairs, \
         {} ExecSync per pod; median (p10–p90). Run took {} s.\n\n",
        m("date"),
        m("os"),
        m("kernel"),
        m("cpus"),
        m("containerd"),
        m("runc"),
        m("pairs"),
        m("execs_per_pod"),
        m("elapsed_s"),
    );
    md += "| figure | rustpod | runc | rustpod/runc | goal | met |\n|---|---|---|---|---|---|\n";
    for f in &FIGURES {
        let [a, b] = [0, 1].map(|i| stats((f.samples)(&samples[i])));
        let ratio = a.median / b.median;
        let (goal, met) = match f.goal {
            Some(g) if ratio <= g => (format!("≤ {g}×"), "yes".to_string()),
            Some(g) => (format!("≤ {g}×"), "**no**".to_string()),
            None => (String::new(), String::new()),
        };
        md += &format!("| {} | {} | {} | {ratio:.2}× | {goal} | {met} |\n", f.label, cell(&a), cell(&b));
    }
    let [a, b] = [0, 1].map(|i| at_return(&samples[i]));
    let n = |v: &Value, k: &str| v[k].as_str().unwrap_or("?").to_string();
    md += &format!(
        "\nAt the call's return: container EXITED in the first ContainerStatus after \
         StopContainer, rustpod {}, runc {}; httpd accepting as StartContainer returned, \
         rustpod {}, runc {}.\n",
        n(&a, "exited_after_stop"),
        n(&b, "exited_after_stop"),
        n(&a, "httpd_accepting"),
        n(&b, "httpd_accepting"),
    );
    md
}

/// How many calls found the state done at their return, as `n/total`: StopContainer whose
/// container was EXITED in the next ContainerStatus, StartContainer whose httpd accepted.
fn at_return(s: &Samples) -> Value {
    json!({
        "exited_after_stop": format!("{}/{}", s.stop.len() - s.stop_lagged, s.stop.len()),
        "httpd_accepting": format!("{}/{}", s.server_ready_at_return, s.server_ready.len()),
    })
}
