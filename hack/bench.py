#!/usr/bin/env python3
"""rustpod benchmarks (issue 6): rustpod vs runc vs crun, and the rustpod shim vs the Go runc shim.

Run through hack/bench, which installs the deps, builds the release binaries and a
matplotlib venv. Must run as root. Everything it creates lives under --work and --state
(the runtimes' --root dirs), and is removed at the end.

Method (see README "Benchmarks"):
- This process makes itself a child subreaper, so every container init, every shim
  daemon and everything they fork ends up reaped here: wall time is measured around the
  whole operation, CPU is the RUSAGE_CHILDREN (user+sys) delta around it, and peak RSS is
  the largest ru_maxrss of any process reaped during it (wait4 gives it per process, and
  ru_maxrss survives execve, so the runtime's init phase counts).
- Runtimes are interleaved in rounds, in a balanced order (williams()); each round is
  one pair for each comparison.
- Debian's crun 1.8 refuses cgroup v1 hybrid, so this process enters a private mount
  namespace once, at start, with /sys/fs/cgroup/unified unmounted (the host's mounts are
  untouched), and every runtime is called directly from there: all three see the same
  cgroup v1 layout and none pays a wrapper. --host-mount-ns runs some of them in the
  host's namespace instead (setns around each spawn), to see what the layout changes.
- The floor (hack/floor.c: unshare -fmpuinC, a proc mount, a fresh memory cgroup,
  chroot, exec /bin/true) is interleaved with the `run` figure as a fourth row.
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_CHILD_SUBREAPER = 36
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2
UNIFIED = "/sys/fs/cgroup/unified"
IMAGE = "docker.io/library/busybox:rustpod-bench"
SANDBOX_ANN = "io.kubernetes.cri.sandbox-id"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


signal.signal(signal.SIGALRM, _alarm)


class Deadline:
    """Raise Timeout in the blocking call that runs past `seconds`."""

    def __init__(self, seconds):
        self.s = seconds

    def __enter__(self):
        signal.setitimer(signal.ITIMER_REAL, self.s)

    def __exit__(self, *a):
        signal.setitimer(signal.ITIMER_REAL, 0)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Proc:
    """Reaping bookkeeping: the largest ru_maxrss, by process too, and the orphans reaped
    since reset()."""
    maxrss = 0
    orphans = 0
    by_process = {}

    @classmethod
    def reset(cls):
        cls.maxrss = 0
        cls.orphans = 0
        cls.by_process = {}

    @classmethod
    def saw(cls, what, kib):
        cls.maxrss = max(cls.maxrss, kib)
        cls.by_process[what] = max(cls.by_process.get(what, 0), kib)


VERBS = {"create", "start", "delete", "run", "exec", "kill", "state", "pause", "resume", "update"}


def process_name(argv):
    """What a command is called in the peak-RSS split: its runtime verb, else its program."""
    return next((a for a in argv[1:] if a in VERBS), os.path.basename(argv[0]))


# ---------------------------------------------------------------- mount namespaces

class Argv(list):
    """A command line and the mount namespace fd it runs in (None: the benchmark's own)."""

    def __init__(self, items, ns=None):
        super().__init__(items)
        self.ns = ns


def oserr(what):
    e = ctypes.get_errno()
    raise OSError(e, f"{what}: {os.strerror(e)}")


class MountNs:
    """The benchmark's private mount namespace, entered once, and the host's, as fds."""
    host = None
    bench = None
    current = None
    host_cgroup = None

    @classmethod
    def enter_private(cls):
        cls.host = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        cls.host_cgroup = cgroup_layout()
        if libc.unshare(CLONE_NEWNS) != 0:
            oserr("unshare(CLONE_NEWNS)")
        # private first, so that the umount below does not propagate to the host
        if libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
            oserr("mount(/, MS_REC|MS_PRIVATE)")
        if os.path.ismount(UNIFIED) and libc.umount2(UNIFIED.encode(), MNT_DETACH) != 0:
            oserr(f"umount2({UNIFIED}, MNT_DETACH)")
        cls.bench = cls.current = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)

    @classmethod
    def use(cls, fd):
        """setns into fd (this process is single-threaded); a no-op when already there."""
        fd = cls.bench if fd is None else fd
        if fd is not None and fd != cls.current:
            if libc.setns(fd, CLONE_NEWNS) != 0:
                oserr("setns(CLONE_NEWNS)")
            cls.current = fd


def cgroup_layout():
    if os.path.ismount(UNIFIED):
        return "v1 hybrid"
    return "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1"


def memory_cgroup(path):
    """The directory of cgroup PATH in the memory hierarchy: v1's memory mount, or v2's one tree
    (hack/bench-sid runs this in the sid guest, on cgroup v2)."""
    return f"/sys/fs/cgroup{path}" if cgroup_layout() == "v2" else f"/sys/fs/cgroup/memory{path}"


def cgroup_line(path):
    """The line of /proc/self/cgroup, as a regex, that puts a process in PATH's memory cgroup."""
    return f"0::{path}" if cgroup_layout() == "v2" else f"[0-9]*:memory:{path}"


class KmemTrace:
    """The memcg-charged allocations of this process's children while tracing is on, from the
    kernel's own events in a tracing instance of our own (tracefs mounted in the benchmark's
    private mount namespace; the global buffer and its settings are left alone): slab objects
    (kmem_cache_alloc with accounted=1), kmalloc and pages with __GFP_ACCOUNT, forks and cgroup
    moves. Kernel stacks are charged without an event: 16 KiB per task."""
    GFP_ACCOUNT = 0x400000  # ___GFP_ACCOUNT_BIT 22 on Linux 6.x (tracefs prints the value)
    EVENTS = {"kmem/kmem_cache_alloc": "accounted == 1", "kmem/kmalloc": f"gfp_flags & {GFP_ACCOUNT:#x}",
              "kmem/mm_page_alloc": f"gfp_flags & {GFP_ACCOUNT:#x}", "sched/sched_process_fork": None,
              "cgroup/cgroup_attach_task": None}
    LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+[\d.]+:\s+(\w+):\s+(.*)$")

    def __init__(self, mount):
        os.makedirs(mount, exist_ok=True)
        if not os.path.ismount(mount):
            run(["mount", "-t", "tracefs", "nodev", mount])
        self.dir = f"{mount}/instances/rustpod-bench-{os.getpid()}"
        if not os.path.isdir(self.dir):
            os.mkdir(self.dir)
        self.write("tracing_on", "0")
        self.write("buffer_size_kb", "16384")
        for ev, flt in self.EVENTS.items():
            if flt:
                self.write(f"events/{ev}/filter", flt)
        self.write("options/event-fork", "1")

    def write(self, name, text):
        with open(f"{self.dir}/{name}", "w") as f:
            f.write(text)

    def __enter__(self):
        self.write("trace", "")
        self.write("set_event_pid", str(os.getpid()))
        for ev in self.EVENTS:
            self.write(f"events/{ev}/enable", "1")
        self.write("tracing_on", "1")
        return self

    def __exit__(self, *exc):
        self.write("tracing_on", "0")
        for ev in self.EVENTS:
            self.write(f"events/{ev}/enable", "0")
        self.text = open(f"{self.dir}/trace").read()
        self.write("trace", "")

    def charged(self, hierarchy, cgroup):
        """KiB charged to `cgroup` (a path in v1 hierarchy id `hierarchy`) by object and by
        process name: what tasks allocated while in it (moved there, or forked by a task in it)."""
        inside, objects, procs = set(), {}, {}
        for line in self.text.splitlines():
            m = self.LINE.match(line)
            if not m:
                continue
            comm, pid, event, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
            if event == "cgroup_attach_task":
                if int(f["dst_root"]) == hierarchy:
                    (inside.add if f["dst_path"] == cgroup else inside.discard)(int(f["pid"]))
                continue
            if event == "sched_process_fork":
                if pid in inside:
                    inside.add(int(f["child_pid"]))
                continue
            if pid not in inside:
                continue
            if event == "mm_page_alloc":
                obj, size = "pages", 4096 << int(f["order"])
            else:
                site = f["call_site"].split("+")[0]
                obj, size = (f"{f['name']} ({site})" if "name" in f else f"kmalloc ({site})"), int(f["bytes_alloc"])
            objects[obj] = objects.get(obj, 0) + size
            procs[comm] = procs.get(comm, 0) + size
        kib = lambda d: {k: round(v / 1024, 1) for k, v in sorted(d.items(), key=lambda kv: -kv[1])}
        return {"by_object": kib(objects), "by_process": kib(procs)}


def memory_hierarchy():
    """The v1 memory hierarchy's id (the first field of its /proc/self/cgroup line)."""
    for line in open("/proc/self/cgroup"):
        hid, controllers, _ = line.split(":", 2)
        if "memory" in controllers.split(","):
            return int(hid)
    return None


class InNs:
    """Spawn argv in its mount namespace, and come back to the benchmark's."""

    def __init__(self, argv):
        self.ns = getattr(argv, "ns", None)

    def __enter__(self):
        MountNs.use(self.ns)

    def __exit__(self, *a):
        MountNs.use(None)


ERRFILE = None
# Peak-RSS pass: each command runs under GNU time, which fork()s from its own small
# process. A process we spawn directly would report our own RSS: posix_spawn shares our
# mm until execve, and the kernel folds the old mm's high-water mark into ru_maxrss.
RSS_MODE = False
RSS_OUT = None


def spawn(argv, stdout=None):
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_DUP2, ERRFILE.fileno(), 2)]
    if stdout is None:
        fa.append((os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0))
    else:
        fa.append((os.POSIX_SPAWN_DUP2, stdout.fileno(), 1))
    with InNs(argv):
        return os.posix_spawnp(argv[0], argv, os.environ, file_actions=fa)


def wait_pid(pid, timeout=60):
    with Deadline(timeout):
        _, st, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(st), ru


def errtext():
    ERRFILE.flush()
    ERRFILE.seek(0)
    t = ERRFILE.read().strip()
    return t[-2000:]


def run(argv, check=True, timeout=60, ok=(0,)):
    """Run argv as a child; returns its exit code. stderr is kept for the error message."""
    ERRFILE.seek(0)
    ERRFILE.truncate()
    name = process_name(argv)
    if RSS_MODE:
        argv = Argv(["/usr/bin/time", "-f", "%M", "-o", RSS_OUT] + argv, getattr(argv, "ns", None))
    pid = spawn(argv)
    try:
        code, _ = wait_pid(pid, timeout)
    except Timeout:
        os.kill(pid, signal.SIGKILL)
        os.wait4(pid, 0)
        raise RuntimeError(f"timed out after {timeout}s: {' '.join(argv)}")
    if RSS_MODE:
        with open(RSS_OUT) as f:
            Proc.saw(name, int(f.read().split()[-1]))
    if check and code not in ok:
        raise RuntimeError(f"exit {code}: {' '.join(argv)}\n{errtext()}")
    return code


def capture(argv, timeout=60):
    with InNs(argv):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def reap_one(timeout=30):
    """Block until one orphan (a container init, a shim) exits; returns (pid, code)."""
    with Deadline(timeout):
        pid, st, ru = os.wait4(-1, 0)
    Proc.saw("orphan (container init)", ru.ru_maxrss)
    Proc.orphans += 1
    return pid, os.waitstatus_to_exitcode(st)


def reap_ready(exclude=()):
    """Reap every child that already exited."""
    n = 0
    while True:
        try:
            pid, st, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return n
        if pid == 0:
            return n
        Proc.saw("orphan (container init)", ru.ru_maxrss)
        Proc.orphans += 1
        n += 1


def children_pids():
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            out += [int(x) for x in open(f"/proc/self/task/{t}/children").read().split()]
        except OSError:
            pass
    return out


def schedstat_ns(pid):
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


# ---------------------------------------------------------------- runtimes

class Runtime:
    def __init__(self, name, argv, root):
        self.name, self.argv, self.root = name, argv, root
        self.ns = None  # the benchmark's mount namespace

    def cmd(self, *args):
        return Argv(self.argv + ["--root", self.root] + list(args), self.ns)

    def version(self):
        argv = Argv(self.argv + ["--version"], self.ns)
        rc, out, err = capture(argv)
        return (out or err).strip().splitlines()[0] if rc == 0 else "?"

    def force_delete(self, cid):
        run(self.cmd("delete", "--force", cid), check=False)


# Syscalls that do one job under two names, counted as one in figure 8. Not clone: crun's
# clone(2) leaves no frame of its own in the call chains, so figure 8 shows the steps below instead.
SYSCALL_KIN = {"mkdirat": "mkdir", "execveat": "execve", "unlinkat": "unlink",
               "renameat2": "rename", "renameat": "rename", "openat2": "openat", "open": "openat", "newfstatat": "statx"}

# Kernel functions whose time (callees included) figure 8 shows whichever syscall led there.
KERNEL_STEPS = {"copy_namespaces": "making the namespaces", "cgroup_mkdir": "making cgroups",
                "cgroup_rmdir": "removing cgroups", "load_elf_binary": "loading a binary (exec)",
                "exit_mmap": "freeing an address space", "asm_exc_page_fault": "page faults"}


def make_bundle(path, rootfs, args, hostname=None, cgroups_path=None, memory=None, env=None, userns=False):
    os.makedirs(path, exist_ok=True)
    rc, out, err = capture(["runc", "spec", "--bundle", path]) if not os.path.exists(f"{path}/config.json") else (0, "", "")
    with open(f"{path}/config.json") as f:
        spec = json.load(f)
    spec["root"]["path"] = rootfs  # absolute: all bundles share one rootfs (runc rejects a symlink)
    spec["process"]["terminal"] = False
    spec["process"]["args"] = args
    # runc 1.3's `spec` adds a cgroup namespace, 1.1's does not: one config for every host.
    spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "cgroup"]
    if env:
        spec["process"]["env"] += env
    if hostname:
        spec["hostname"] = hostname
    if cgroups_path:
        spec["linux"]["cgroupsPath"] = cgroups_path
    if memory is not None:
        spec["linux"].setdefault("resources", {})["memory"] = {"limit": memory}
    if userns:
        # As a hostUsers: false pod's: its own 65536 ids from 100000 (the rootfs stays root's).
        spec["linux"]["namespaces"].append({"type": "user"})
        spec["linux"]["uidMappings"] = spec["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
    with open(f"{path}/config.json", "w") as f:
        json.dump(spec, f, indent=1)
    return path


def parse_strace(path):
    """`strace -c` summary: total calls, failed calls, and calls per syscall (most first)."""
    per, total, errors = {}, 0, 0
    for line in open(path):
        f = line.split()
        if len(f) < 5 or not f[0].replace(".", "").isdigit():
            continue  # header, rules, and strace's own messages
        nums = f[:-1]
        # % time, seconds, usecs/call, calls[, errors]; the errors column is blank when 0
        calls, errs = int(nums[3]), int(nums[4]) if len(nums) > 4 else 0
        if f[-1] == "total":
            total, errors = calls, errs
        else:
            per[f[-1]] = calls
    return {"calls": total, "errors": errors,
            "by_syscall": dict(sorted(per.items(), key=lambda kv: -kv[1]))}


SYSCALL_RE = re.compile(r"^([a-z0-9_]+)\(")
# a successful execve/execveat: the path (empty for execveat(fd, "")) and argv
EXEC_RE = re.compile(r'^(execve|execveat)\((?:\d+, )?"([^"]*)", \[(.*?)\], .*\) = 0$')
# clone/clone3 of a thread: the new tid, in strace's PID namespace where --decode-pids=pidns gives it
THREAD_RE = re.compile(r"^clone3?\(.*CLONE_THREAD.*\) = (\d+)(?: /\* (\d+) in strace's PID NS \*/)?$")
CHILD_RE = re.compile(r"^(?:clone3?|fork|vfork)\(.*\) = (\d+)(?: /\* (\d+) in strace's PID NS \*/)?$")
OPEN_RE = re.compile(r'^(?:open|openat|openat2)\((?:[^,]+, )?"([^"]*)".*\) = \d+')
# Anchored: "sys/fs/cgroup" (a mount target, opened by the rootfs steps) is not a /proc file. A bare
# "cgroup" is one opened relative to a /proc/self descriptor.
PROC_SELF_FILE = {"mountinfo": re.compile(r"(^|/)mountinfo$"),
                  "cgroup": re.compile(r"^(/proc/)?((self|thread-self|\d+)/)?cgroup$")}


def split_strace_ff(prefix, runtime_bin, program_argv):
    """`strace -ff -o PREFIX` files of one command, per process class.

    cli: the process strace started (no other file forked it); reexec: a
    process whose exec is of the runtime itself (/proc/self/exe, its path, or
    execveat of a file descriptor, as runc and crun do from a sealed memfd);
    init: the process that execs the container program (counted up to that
    execve; what the program does after it is `program`); intermediate: the
    runtime's other processes. Threads count with their process."""
    d, base = os.path.dirname(prefix), os.path.basename(prefix) + "."
    files = {int(f[len(base):]): os.path.join(d, f) for f in os.listdir(d) if f.startswith(base) and f[len(base):].isdigit()}
    calls, leader, children, execs = {}, {}, set(), {}
    for pid, path in files.items():
        lines = [l.rstrip("\n") for l in open(path, errors="replace")]
        calls[pid] = [l for l in lines if SYSCALL_RE.match(l)]  # not `+++ exited`, `--- SIG`
        for l in calls[pid]:
            m = THREAD_RE.match(l)
            if m:
                leader[int(m.group(2) or m.group(1))] = pid
            m = CHILD_RE.match(l)
            if m:
                children.add(int(m.group(2) or m.group(1)))
    root = lambda p: root(leader[p]) if p in leader and leader[p] != p else p
    prog = ", ".join(json.dumps(a) for a in program_argv)
    real_bin = os.path.realpath(runtime_bin)
    cls, out = {}, {}
    for pid in sorted(files):
        if pid in leader:
            continue
        c = calls[pid]
        kind, cut = ("cli" if pid not in children else "intermediate"), len(c)
        for i, l in enumerate(c):
            m = EXEC_RE.match(l)
            if not m:
                continue
            if m.group(3) == prog:
                kind, cut = "init", i + 1
                break
            if kind != "cli" and (m.group(1) == "execveat" or m.group(2) == "/proc/self/exe" or os.path.realpath(m.group(2)) == real_bin):
                kind = "reexec"
        cls[pid] = kind
        execs[pid] = cut
    for pid, c in calls.items():
        top = root(pid)
        kind = cls.get(top, "intermediate")
        parts = [(kind, c[:execs[pid]] if pid == top else c)]
        if pid == top and kind == "init":
            parts.append(("program", c[execs[pid]:]))
        for k, cs in parts:
            o = out.setdefault(k, {"processes": 0, "threads": 0, "calls": 0, "by_syscall": {}, "opens": {n: 0 for n in PROC_SELF_FILE},
                                   "statx_fstatfs": 0})
            o["processes" if pid == top else "threads"] += 1
            o["calls"] += len(cs)
            for l in cs:
                name = SYSCALL_RE.match(l).group(1)
                o["by_syscall"][name] = o["by_syscall"].get(name, 0) + 1
                m = OPEN_RE.match(l)
                if m:
                    for n, rx in PROC_SELF_FILE.items():
                        if rx.search(m.group(1)) and not m.group(1).startswith("/sys/"):
                            o["opens"][n] += 1
            o["statx_fstatfs"] = o["by_syscall"].get("statx", 0) + o["by_syscall"].get("fstatfs", 0)
    for o in out.values():
        o["by_syscall"] = dict(sorted(o["by_syscall"].items(), key=lambda kv: -kv[1]))
        o["top"] = list(o["by_syscall"].items())[:3]
    order = ("cli", "reexec", "intermediate", "init", "program")
    return {k: out[k] for k in order if k in out}


# ---------------------------------------------------------------- statistics

def williams(k):
    """A Williams design: orders of range(k) in which every item comes first, and follows each
    other item, equally often. A plain rotation (A B C, B C A, ...) gives every runtime the same
    predecessor each round, and wall times depend on it: a cgroup.procs write waits for an RCU
    grace period when nobody wrote one recently."""
    base, lo, hi = [0], 1, k - 1
    for j in range(1, k):
        if j % 2:
            base.append(lo)
            lo += 1
        else:
            base.append(hi)
            hi -= 1
    rows = [[(b + r) % k for b in base] for r in range(k)]
    return rows + [r[::-1] for r in rows] if k % 2 else rows


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs):
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "p25": pct(xs, .25), "p75": pct(xs, .75),
            "p10": pct(xs, .10), "p90": pct(xs, .90), "min": min(xs), "max": max(xs),
            "mean": statistics.fmean(xs)}


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def paired_ratio(a, b):
    """Median of the per-round ratios a_i/b_i (pairs are the same round)."""
    rs = [x / y for x, y in zip(a, b) if y > 0]
    return statistics.median(rs) if rs else None


# ---------------------------------------------------------------- the benchmark

class Bench:
    def __init__(self, args):
        self.a = args
        self.work = args.work
        self.res = {"figures": {}, "goals": [], "notes": []}
        self.bins = args.bin_dir
        self.rustpod_bin = os.path.join(self.bins, "rustpod")
        self.shim_bin = os.path.join(self.bins, "containerd-shim-rustpod-v1")
        st = args.state
        self.rt = {
            "rustpod": Runtime("rustpod", [self.rustpod_bin], f"{st}/root-rustpod"),
            "runc": Runtime("runc", ["runc"], f"{st}/root-runc"),
            "crun": Runtime("crun", ["crun"], f"{st}/root-crun"),
        }
        for name in args.host_mount_ns:
            self.rt[name].ns = MountNs.host
        self.floor_bin = args.floor_bin
        self.order = ["rustpod", "runc", "crun"]
        self.seq = 0
        self.ctrd_dir = None
        self.live = []  # (runtime, id) to delete on exit

    def cid(self, tag):
        self.seq += 1
        return f"rpb-{tag}-{self.seq}"

    def rounds(self, n, names=None):
        """n rounds in a balanced order: each runtime comes first, and follows each of the others, equally often."""
        names = names or self.order
        orders = williams(len(names))
        for i in range(n):
            yield [names[j] for j in orders[i % len(orders)]]

    # --- setup
    def setup(self):
        os.makedirs(self.work, exist_ok=True)
        for r in self.rt.values():
            os.makedirs(r.root, exist_ok=True)
        self.rootfs = f"{self.work}/rootfs"
        subprocess.run([f"{HERE}/make-rootfs.sh", self.rootfs], check=True)
        self.b_true = make_bundle(f"{self.work}/b-true", self.rootfs, ["/bin/true"])
        self.b_sleep = make_bundle(f"{self.work}/b-sleep", self.rootfs, ["sleep", "1000000"])
        # As containerd, docker and podman always set it: a cgroup of its own, no parent to make.
        self.b_true_cg = make_bundle(f"{self.work}/b-true-cg", self.rootfs, ["/bin/true"], cgroups_path="/rpb-run-cg")
        self.b_true_sd = make_bundle(f"{self.work}/b-true-sd", self.rootfs, ["/bin/true"])
        self.b_true_userns = make_bundle(f"{self.work}/b-true-userns", self.rootfs, ["/bin/true"], cgroups_path="/rpb-run-userns",
                                         userns=True)
        m = self.res
        m["machine"] = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
            "mem_gib": round(os.sysconf("SC_PHYS_PAGES") * PAGE / 2**30, 1),
            "os": next((l.split("=", 1)[1].strip().strip('"') for l in open("/etc/os-release") if l.startswith("PRETTY_NAME=")), "?"),
            "cgroup": (MountNs.host_cgroup if MountNs.host_cgroup == cgroup_layout()
                       else f"{MountNs.host_cgroup} on the host, {cgroup_layout()} in the benchmark's mount namespace"),
            "versions": {n: r.version() for n, r in self.rt.items()},
            "mount_ns": {n: "host" if r.ns == MountNs.host else f"private, without {UNIFIED}" for n, r in self.rt.items()},
            "state_fs": capture(["stat", "-f", "-c", "%T", self.a.state])[1].strip(),
            "rustpod_binary": self.rustpod_bin,
            "options": {"pairs": self.a.pairs, "quick": self.a.quick},
        }

    def cleanup(self):
        signal.setitimer(signal.ITIMER_REAL, 0)
        for rname, cid in list(self.live):
            try:
                self.rt[rname].force_delete(cid)
            except Exception as e:
                log(f"cleanup {rname} {cid}: {e}")
        self.live.clear()
        if self.ctrd_dir:
            self.containerd_stop()
        # Anything left in our roots (an aborted figure): delete by id, per runtime.
        for r in self.rt.values():
            if os.path.isdir(r.root):
                for cid in os.listdir(r.root):
                    if cid.startswith("rpb-") or cid.startswith("rpbp-"):
                        try:
                            r.force_delete(cid)
                        except Exception:
                            pass
        try:
            with Deadline(10):
                while True:
                    os.wait4(-1, 0)
        except (ChildProcessError, Timeout):
            pass
        tracefs = f"{self.work}/tracefs"
        if os.path.ismount(tracefs):
            instance = f"{tracefs}/instances/rustpod-bench-{os.getpid()}"
            if os.path.isdir(instance):
                os.rmdir(instance)  # tracefs removes an instance, files and all, by rmdir
            run(["umount", tracefs], check=False)
        if not self.a.keep:
            shutil.rmtree(self.work, ignore_errors=True)
            # Only the roots we made: --state may name a directory that holds more.
            for r in self.rt.values():
                shutil.rmtree(r.root, ignore_errors=True)
            try:
                os.rmdir(self.a.state)
            except OSError:
                pass

    # --- probe: each runtime proves it does the work before it is timed
    def probe(self):
        log("== probe: PID 1, hostname, /proc, own cgroup, exit 7")
        out = {}
        for name in self.order:
            r = self.rt[name]
            cg = f"/rpb-probe-{name}"
            script = ("[ $$ = 1 ] || exit 11; [ \"$(hostname)\" = rpb-probe ] || exit 12; "
                      "grep -q '^proc /proc proc ' /proc/mounts && [ -r /proc/self/stat ] || exit 13; "
                      f"grep -qx '{cgroup_line(cg)}' /proc/self/cgroup || exit 14; exit 7")
            b = make_bundle(f"{self.work}/b-probe-{name}", self.rootfs, ["sh", "-c", script],
                            hostname="rpb-probe", cgroups_path=cg)
            res = {}
            # run (foreground): the runtime reports the container's exit code
            cid = f"rpbp-{name}-run"
            code = run(r.cmd("run", "--bundle", b, cid), check=False, timeout=30)
            res["run_exit"] = code
            reap_ready()
            gone = run(r.cmd("state", cid), check=False) != 0
            res["run_deletes"] = gone
            if not gone:
                r.force_delete(cid)
            # create / start / wait: the init is our child (subreaper), so we see its status
            cid = f"rpbp-{name}-cs"
            run(r.cmd("create", "--bundle", b, cid), timeout=30)
            self.live.append((name, cid))
            rc, st, _ = capture(r.cmd("state", cid))
            pid = json.loads(st)["pid"]
            procs = open(f"{memory_cgroup(cg)}/cgroup.procs").read().split()
            res["host_sees_init_in_cgroup"] = str(pid) in procs
            res["init_is_our_child"] = pid in children_pids()
            run(r.cmd("start", cid))
            p, code = reap_one()
            reap_ready()
            res["create_start_exit"] = code
            run(r.cmd("delete", cid))
            self.live.remove((name, cid))
            res["cgroup_removed"] = not os.path.exists(memory_cgroup(cg))
            res["ok"] = (res["run_exit"] == 7 and res["create_start_exit"] == 7 and
                         res["host_sees_init_in_cgroup"] and res["run_deletes"])
            out[name] = res
            log(f"  {name}: {res}")
            if not res["ok"]:
                raise RuntimeError(f"probe failed for {name}: {res}")
        self.res["probe"] = out

    # --- figure 1: lifecycle and run
    def lifecycle_once(self, r):
        cid = self.cid("lc")
        Proc.reset()
        c0 = cpu_children()
        t0 = time.perf_counter()
        run(r.cmd("create", "--bundle", self.b_true, cid))
        run(r.cmd("start", cid))
        _, code = reap_one()
        reap_ready()
        run(r.cmd("delete", cid))
        t1 = time.perf_counter()
        cpu = cpu_children() - c0
        if code != 0:
            raise RuntimeError(f"{r.name}: /bin/true exited {code}")
        return t1 - t0, cpu, Proc.maxrss, Proc.orphans

    def run_once(self, r, bundle=None, cid=None, flags=()):
        cid = cid or self.cid("run")
        Proc.reset()
        c0 = cpu_children()
        t0 = time.perf_counter()
        code = run(r.cmd(*flags, "run", "--bundle", bundle or self.b_true, cid), check=False)
        t1 = time.perf_counter()
        reap_ready()
        cpu = cpu_children() - c0
        if code != 0:
            raise RuntimeError(f"{r.name} run: exit {code}\n{errtext()}")
        return t1 - t0, cpu, Proc.maxrss, Proc.orphans

    def run_systemd_once(self, r):
        """`run` under systemd's cgroup driver, a scope of its own per container (the cgroupsPath
        written before the clock starts), as docker, podman and kubelet's systemd driver ask."""
        cid = self.cid("sd")
        with open(f"{self.b_true_sd}/config.json") as f:
            spec = json.load(f)
        spec["linux"]["cgroupsPath"] = f"system.slice:rpb:{cid}"
        with open(f"{self.b_true_sd}/config.json", "w") as f:
            json.dump(spec, f)
        return self.run_once(r, self.b_true_sd, cid, ("--systemd-cgroup",))

    def exec_once(self, r, cid):
        Proc.reset()
        c0 = cpu_children()
        t0 = time.perf_counter()
        run(r.cmd("exec", cid, "/bin/true"))
        t1 = time.perf_counter()
        return t1 - t0, cpu_children() - c0, Proc.maxrss, 0

    def floor_once(self):
        """The floor: hack/floor.c does only the kernel work of run + delete (see its header)."""
        cg = memory_cgroup(f"/{self.cid('floor')}")
        Proc.reset()
        c0 = cpu_children()
        t0 = time.perf_counter()
        code = run([self.floor_bin, self.rootfs, cg], check=False)
        t1 = time.perf_counter()
        cpu = cpu_children() - c0
        if code != 0:
            raise RuntimeError(f"floor: exit {code}\n{errtext()}")
        return t1 - t0, cpu, Proc.maxrss, Proc.orphans

    def collect(self, fig, n, fn, extra=None, floor=False):
        """Interleaved rounds of fn(runtime) for every runtime, and of the floor if asked."""
        names = self.order + (["floor"] if floor else [])

        def call(name):
            return self.floor_once() if name == "floor" else fn(self.rt[name], *(extra[name] if extra else ()))

        raw = {name: {"wall_ms": [], "cpu_ms": [], "maxrss_kib": [], "orphans": []} for name in names}
        for _ in range(self.a.warmup):
            for name in names:
                call(name)
        for order in self.rounds(n, names):
            for name in order:
                w, c, m, o = call(name)
                d = raw[name]
                d["wall_ms"].append(w * 1e3)
                d["cpu_ms"].append(c * 1e3)
                d["maxrss_kib"].append(m)
                d["orphans"].append(o)
        # peak RSS pass (untimed): every command under GNU time, the container init via wait4
        global RSS_MODE
        by_process = {name: {} for name in names}
        for name in names:
            raw[name]["maxrss_kib"] = []
            RSS_MODE = True
            try:
                for _ in range(3):
                    raw[name]["maxrss_kib"].append(call(name)[2])
                    for what, kib in Proc.by_process.items():
                        by_process[name][what] = max(by_process[name].get(what, 0), kib)
            finally:
                RSS_MODE = False
        fig_res = {"n": n, "runtimes": {}}
        for name in names:
            d = raw[name]
            fig_res["runtimes"][name] = {
                "wall_ms": summary(d["wall_ms"]), "cpu_ms": summary(d["cpu_ms"]),
                "peak_rss_kib": max(d["maxrss_kib"]), "peak_rss_kib_by_process": by_process[name], "raw": d}
        rp = raw["rustpod"]
        fig_res["ratios"] = {}
        for other in ("runc", "crun"):
            o = raw[other]
            fig_res["ratios"][other] = {
                "wall": ratio(statistics.median(rp["wall_ms"]), statistics.median(o["wall_ms"])),
                "cpu": ratio(statistics.median(rp["cpu_ms"]), statistics.median(o["cpu_ms"])),
                "wall_paired": paired_ratio(rp["wall_ms"], o["wall_ms"]),
                "cpu_paired": paired_ratio(rp["cpu_ms"], o["cpu_ms"]),
                "peak_rss": ratio(max(rp["maxrss_kib"]), max(o["maxrss_kib"]))}
        if floor:
            fl = raw["floor"]
            fig_res["floor_multiple"] = {name: {
                "wall": ratio(statistics.median(raw[name]["wall_ms"]), statistics.median(fl["wall_ms"])),
                "cpu": ratio(statistics.median(raw[name]["cpu_ms"]), statistics.median(fl["cpu_ms"])),
                "wall_paired": paired_ratio(raw[name]["wall_ms"], fl["wall_ms"]),
                "cpu_paired": paired_ratio(raw[name]["cpu_ms"], fl["cpu_ms"])} for name in self.order}
        self.res["figures"][fig] = fig_res
        self.print_fig(fig)

    def fig_cli(self):
        n = self.a.pairs
        log(f"== figure 1a: create+start+wait+delete of /bin/true, {n} rounds")
        self.collect("lifecycle", n, self.lifecycle_once)
        log(f"== figure 1b: run (foreground, deletes on exit) of /bin/true and the floor, {n} rounds")
        self.collect("run", n, self.run_once, floor=True)
        log(f"== figure 1c: run of /bin/true with a linux.cgroupsPath, {n} rounds")
        self.collect("run_cg", n, self.run_once, extra={name: (self.b_true_cg,) for name in self.order})
        log(f"== figure 1e: run of /bin/true in a user namespace of its own, with a cgroupsPath, {n} rounds")
        self.collect("run_userns", n, self.run_once, extra={name: (self.b_true_userns,) for name in self.order})
        if os.path.isdir("/run/systemd/system"):
            log(f"== figure 1d: run of /bin/true under systemd's cgroup driver, {n} rounds")
            self.collect("run_sd", n, self.run_systemd_once)
        else:
            log("== SKIP figure 1d (run under systemd's cgroup driver): systemd is not PID 1 here "
                "(/run/systemd/system is missing); hack/bench-sid runs it")

    def fig_exec(self):
        n = self.a.pairs
        log(f"== figure 2: exec /bin/true into a running container, {n} rounds")
        ids = {}
        for name in self.order:
            cid = self.cid("ex")
            r = self.rt[name]
            run(r.cmd("create", "--bundle", self.b_sleep, cid))
            self.live.append((name, cid))
            run(r.cmd("start", cid))
            ids[name] = (cid,)
        try:
            self.collect("exec", n, self.exec_once, extra=ids)
        finally:
            for name, (cid,) in ids.items():
                self.rt[name].force_delete(cid)
                self.live.remove((name, cid))
            self.reap_until_empty()

    def reap_until_empty(self, timeout=20):
        if self.ctrd_pid:  # containerd is our child too and stays: poll for the others
            end = time.time() + timeout
            while set(children_pids()) - {self.ctrd_pid} and time.time() < end:
                reap_ready()
                time.sleep(0.05)
            reap_ready()
            return
        try:
            with Deadline(timeout):
                while True:
                    pid, st, ru = os.wait4(-1, 0)
                    if self.ctrd_pid and pid == self.ctrd_pid:
                        raise RuntimeError("containerd exited")
        except ChildProcessError:
            pass
        except Timeout:
            left = []
            for p in children_pids():
                try:
                    left.append(f"{p}:" + open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:80])
                except OSError:
                    pass
            log(f"  (children still running after teardown: {left})")

    ctrd_pid = None

    # --- figure 7: syscall counts
    def strace(self, argv, tag):
        """Run argv under `strace -f -c` (it and everything it forks); returns the parsed counts."""
        out = f"{self.work}/strace-{tag}.txt"
        run(Argv(["strace", "-f", "-c", "-o", out] + argv, getattr(argv, "ns", None)), timeout=60)
        return parse_strace(out)

    def strace_ff(self, r, argv, tag):
        """Run argv under `strace -ff` (a file per process); returns its calls per process class."""
        d = f"{self.work}/strace-ff-{tag}"
        os.makedirs(d, exist_ok=True)
        run(Argv(["strace", "-ff", "--decode-pids=pidns", "-o", f"{d}/t"] + argv, getattr(argv, "ns", None)), timeout=60)
        return split_strace_ff(f"{d}/t", shutil.which(r.argv[0]) or r.argv[0], ["/bin/true"])

    def fig_syscalls(self):
        log("== figure 7: syscalls (strace -f -c) of one run, one delete and one exec of /bin/true; run and exec again under strace -ff, per process")
        out = {}
        for name in self.order:
            r = self.rt[name]
            res = {}
            # run: the foreground run deletes the container on exit, in all three runtimes
            res["run"] = self.strace(r.cmd("run", "--bundle", self.b_true, self.cid("st")), f"{name}-run")
            reap_ready()
            res["run_by_process"] = self.strace_ff(r, r.cmd("run", "--bundle", self.b_true, self.cid("st")), f"{name}-run")
            reap_ready()
            res["run_userns"] = self.strace(r.cmd("run", "--bundle", self.b_true_userns, self.cid("st")), f"{name}-run-userns")
            reap_ready()
            # delete alone, of a container whose /bin/true has exited
            cid = self.cid("st")
            run(r.cmd("create", "--bundle", self.b_true, cid))
            self.live.append((name, cid))
            run(r.cmd("start", cid))
            reap_one()
            reap_ready()
            res["delete"] = self.strace(r.cmd("delete", cid), f"{name}-delete")
            self.live.remove((name, cid))
            cid = self.cid("st")
            run(r.cmd("run", "-d", "--bundle", self.b_sleep, cid))
            self.live.append((name, cid))
            res["exec"] = self.strace(r.cmd("exec", cid, "/bin/true"), f"{name}-exec")
            res["exec_by_process"] = self.strace_ff(r, r.cmd("exec", cid, "/bin/true"), f"{name}-exec")
            self.teardown([(name, cid)])
            out[name] = res
        out["floor"] = {"run": self.strace([self.floor_bin, self.rootfs, memory_cgroup(f"/{self.cid('floor')}")], "floor")}
        reap_ready()
        self.res["figures"]["syscalls"] = {"runtimes": out}
        for name, res in out.items():
            log(f"  {name:8} " + ", ".join(f"{k} {v['calls']} calls ({v['errors']} failed)" for k, v in res.items() if "errors" in v))
            if "run_by_process" in res:
                for op in ("run", "exec"):
                    log(f"  {'':8} {op} by process: " + ", ".join(f"{k} {v['calls']}" for k, v in res[f"{op}_by_process"].items()))

    # --- figure 8: where a run's CPU goes, by kernel entry point (perf)
    PERF_PERIOD_NS = 50_000  # one cpu-clock sample per 50 µs of a task's CPU

    def fig_profile(self, n=100):
        """`perf record -g` of n runs (with a cgroupsPath) per runtime: ms per run in user space, in the kernel,
        and under each syscall (a call's children included). Sampling inflates the figures, crun's more than
        ours: compare where the time goes, not how much."""
        log(f"== figure 8: perf profile of {n} runs of /bin/true with a cgroupsPath, rustpod and crun")
        probe = f"{self.work}/perf-probe.data"
        if not shutil.which("perf") or run(["perf", "record", "-q", "-e", "cpu-clock", "-o", probe, "true"], check=False) != 0:
            reason = "perf is missing or cannot record cpu-clock here"
            log(f"  SKIP figure 8: {reason}")
            self.res["figures"]["profile"] = {"skipped": reason}
            return
        out = {"n": n, "period_ns": self.PERF_PERIOD_NS, "runtimes": {}}
        for name in ("rustpod", "crun"):
            r = self.rt[name]
            data = f"{self.work}/perf-{name}.data"
            cmd = " ".join(shlex.quote(a) for a in r.cmd("run", "--bundle", self.b_true_cg, ""))
            loop = f"for i in $(seq {n}); do {cmd}rpb-prof-$i || exit 1; done"
            run(Argv(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-c", str(self.PERF_PERIOD_NS), "-o", data,
                      "--", "sh", "-c", loop], r.ns), timeout=300)
            reap_ready()
            out["runtimes"][name] = self.perf_split(data, os.path.basename(r.argv[0]), n)
        self.res["figures"]["profile"] = out
        for name, p in out["runtimes"].items():
            log(f"  {name:8} {p['total_ms']:.2f} ms per run: user {p['user_ms']:.2f}, kernel {p['kernel_ms']:.2f}")

    def perf_split(self, data, comm, n):
        """ms per run of the runtime's own processes (comm): self samples by user/kernel, children by syscall.
        Sorted by comm and symbol, not filtered with --comm, which drops the chains that start in user space
        (page faults, exec)."""
        ms = self.PERF_PERIOD_NS / 1e6 / n
        rc, text, err = capture(["perf", "report", "-i", data, "--children", "--sort", "comm,sym", "-g", "none", "-n",
                                 "--stdio"], timeout=300)
        if rc != 0:
            raise RuntimeError(f"perf report: {err.strip()[-500:]}")
        everything = user = kernel = 0
        children, steps = {}, {}
        for line in text.splitlines():
            m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
            if not m:
                continue
            samples = int(m[3])
            everything += samples
            if m[4] != comm:
                continue
            pct, space, sym = float(m[1]), m[5], m[6]
            if space == "k":
                kernel += samples
            else:
                user += samples
            if sym in KERNEL_STEPS:
                steps[sym] = pct
            sc = re.match(r"^__(?:x64|do|se)_sys_(\w+)$", sym)
            if sc:  # __x64_sys_X wraps __do_sys_X: the outer one holds both
                children[sc[1]] = max(children.get(sc[1], 0), pct)
        merged = {}
        for k, v in children.items():  # crun makes mkdirat where we make mkdir
            k = SYSCALL_KIN.get(k, k)
            merged[k] = merged.get(k, 0) + v
        to_ms = lambda pct: round(pct / 100 * everything * ms, 3)
        return {"total_ms": round((user + kernel) * ms, 3), "user_ms": round(user * ms, 3),
                "kernel_ms": round(kernel * ms, 3),
                "by_step_ms": {KERNEL_STEPS[k]: to_ms(steps.get(k, 0)) for k in KERNEL_STEPS},
                "by_syscall_ms": {k: to_ms(v) for k, v in sorted(merged.items(), key=lambda kv: -kv[1])}}

    # --- figure 6: smallest memory limit
    def fig_memlimit(self):
        log("== figure 6: smallest memory.limit with which /bin/true starts (binary search 256 KiB..64 MiB)")
        out = {}
        lo0, hi0 = 256 * 1024, 64 * 2**20
        step = 16 * 1024 if not self.a.quick else 64 * 1024
        for name in self.order:
            r = self.rt[name]
            tries = []

            def ok(limit):
                b = make_bundle(f"{self.work}/b-mem-{name}", self.rootfs, ["/bin/true"], memory=limit)
                cid = self.cid("mem")
                code = run(r.cmd("run", "--bundle", b, cid), check=False, timeout=30)
                reap_ready()
                r.force_delete(cid)
                tries.append((limit, code))
                return code == 0

            if ok(lo0):
                best = lo0
            elif not ok(hi0):
                best = None
            else:
                lo, hi = lo0, hi0  # lo fails, hi works
                while hi - lo > step:
                    mid = (lo + hi) // 2 // PAGE * PAGE
                    if ok(mid):
                        hi = mid
                    else:
                        lo = mid
                # confirm: the boundary must work 3 times in a row, else move up
                while not all(ok(hi) for _ in range(3)):
                    hi += step
                best = hi
            out[name] = {"min_limit_kib": best // 1024 if best else None, "upper_bound": hi0 // 1024,
                         "lower_bound": lo0 // 1024, "step_kib": step // 1024,
                         "tries": [{"limit_kib": l // 1024, "exit": c} for l, c in tries]}
            out[name]["charged_after_create"] = self.charged_after_create(r)
            log(f"  {name}: {out[name]['min_limit_kib']} KiB ({len(tries)} tries); charged after create: {out[name]['charged_after_create']}")
        self.res["figures"]["memlimit"] = out

    def charged_after_create(self, r):
        """What the container's v1 memory cgroup is charged once `create` returns (init waiting to exec), in KiB:
        kernel memory (now, and the peak since the cgroup was made), anon and page cache; and, traced, what
        the tasks in it allocated by kernel object and by process (freed ones too: the peak's)."""
        cg = f"/rpb-charge-{r.name}-{self.seq}"
        d = f"/sys/fs/cgroup/memory{cg}"
        b = make_bundle(f"{self.work}/b-charge-{r.name}", self.rootfs, ["/bin/true"], cgroups_path=cg)
        cid = self.cid("charge")
        trace = None
        if memory_hierarchy() is not None:
            try:
                trace = KmemTrace(f"{self.work}/tracefs")
            except (OSError, subprocess.CalledProcessError) as e:
                log(f"  (no kernel-object trace: {e})")
        if trace:
            with trace:
                run(r.cmd("create", "--bundle", b, cid))
        else:
            run(r.cmd("create", "--bundle", b, cid))
        self.live.append((r.name, cid))
        try:
            time.sleep(1)  # memory.stat's per-CPU counters are flushed lazily
            kib = lambda f: int(open(f"{d}/{f}").read()) // 1024
            st = {l.split()[0]: int(l.split()[1]) // 1024 for l in open(f"{d}/memory.stat")}
            out = {"kmem_kib": kib("memory.kmem.usage_in_bytes"), "kmem_peak_kib": kib("memory.kmem.max_usage_in_bytes"),
                   "anon_kib": st["rss"], "cache_kib": st["cache"]}
            if trace:
                out["traced"] = trace.charged(memory_hierarchy(), cg)
            return out
        except (OSError, KeyError, ValueError) as e:
            return {"not_measured": str(e)}
        finally:
            r.force_delete(cid)
            self.live.remove((r.name, cid))
            reap_ready()

    # --- figure 5: scale
    def fig_scale(self):
        n50 = 50 if not self.a.quick else 20
        rounds = 3 if not self.a.quick else 1
        log(f"== figure 5a: {n50} containers started concurrently (run -d), {rounds} rounds per runtime")
        conc = {name: {"wall_ms": [], "cpu_ms": []} for name in self.order}
        for order in self.rounds(rounds):
            for name in order:
                r = self.rt[name]
                ids = [self.cid("c") for _ in range(n50)]
                self.live += [(name, i) for i in ids]
                c0 = cpu_children()
                t0 = time.perf_counter()
                ERRFILE.seek(0)
                ERRFILE.truncate()
                pids = [spawn(r.cmd("run", "-d", "--bundle", self.b_sleep, i)) for i in ids]
                codes = [wait_pid(p, 120)[0] for p in pids]
                t1 = time.perf_counter()
                reap_ready()
                cpu = cpu_children() - c0
                inits = [p for p in children_pids() if p != self.ctrd_pid]
                cpu += sum(schedstat_ns(p) for p in inits) / 1e9
                if any(codes):
                    raise RuntimeError(f"{name}: {sum(1 for c in codes if c)} of {n50} run -d failed\n{errtext()}")
                rc, st, _ = capture(r.cmd("list", "--format", "json"))
                running = sum(1 for c in json.loads(st or "[]") if c.get("status") == "running" and c["id"] in ids)
                if running != n50:
                    raise RuntimeError(f"{name}: only {running} of {n50} running")
                conc[name]["wall_ms"].append((t1 - t0) * 1e3)
                conc[name]["cpu_ms"].append(cpu * 1e3)
                self.teardown([(name, i) for i in ids])
        res = {"containers": n50, "rounds": rounds, "runtimes": {}}
        for name in self.order:
            res["runtimes"][name] = {"wall_ms": summary(conc[name]["wall_ms"]), "cpu_ms": summary(conc[name]["cpu_ms"]),
                                     "raw": conc[name]}
        rp = conc["rustpod"]
        res["ratios"] = {o: {"wall": ratio(statistics.median(rp["wall_ms"]), statistics.median(conc[o]["wall_ms"])),
                             "cpu": ratio(statistics.median(rp["cpu_ms"]), statistics.median(conc[o]["cpu_ms"]))}
                         for o in ("runc", "crun")}
        self.res["figures"]["scale_concurrent"] = res
        log("  " + ", ".join(f"{n}: {statistics.median(conc[n]['wall_ms']):.0f} ms wall, {statistics.median(conc[n]['cpu_ms']):.0f} ms CPU" for n in self.order))

        nmax = 100 if not self.a.quick else 20
        log(f"== figure 5b: creation time (run -d) with 0..{nmax - 1} of its own containers running (interleaved, host has ~3x)")
        ids = {name: [] for name in self.order}
        series = {name: {"running_before": [], "host_running_before": [], "wall_ms": [], "cpu_ms": []} for name in self.order}
        for k, order in enumerate(self.rounds(nmax)):
            for name in order:
                r = self.rt[name]
                cid = self.cid("s")
                host = sum(len(v) for v in ids.values())
                Proc.reset()
                c0 = cpu_children()
                t0 = time.perf_counter()
                run(r.cmd("run", "-d", "--bundle", self.b_sleep, cid))
                t1 = time.perf_counter()
                ids[name].append(cid)
                self.live.append((name, cid))
                s = series[name]
                s["running_before"].append(k)
                s["host_running_before"].append(host)
                s["wall_ms"].append((t1 - t0) * 1e3)
                s["cpu_ms"].append((cpu_children() - c0) * 1e3)
        self.teardown([(name, i) for name in self.order for i in ids[name]])
        res = {"max": nmax, "runtimes": {}}
        for name in self.order:
            s = series[name]
            q = max(1, nmax // 10)
            res["runtimes"][name] = {"first_decile_wall_ms": statistics.median(s["wall_ms"][:q]),
                                     "last_decile_wall_ms": statistics.median(s["wall_ms"][-q:]),
                                     "raw": s}
            res["runtimes"][name]["growth"] = ratio(res["runtimes"][name]["last_decile_wall_ms"],
                                                    res["runtimes"][name]["first_decile_wall_ms"])
        self.res["figures"]["scale_growth"] = res
        log("  " + ", ".join(f"{n}: {res['runtimes'][n]['first_decile_wall_ms']:.1f} -> {res['runtimes'][n]['last_decile_wall_ms']:.1f} ms" for n in self.order))

    def teardown(self, pairs):
        for name, i in pairs:
            self.rt[name].force_delete(i)
            self.live.remove((name, i))
        self.reap_until_empty()

    # --- containerd figures 3 and 4
    def containerd_start(self):
        d = self.a.containerd_dir
        shutil.rmtree(d, ignore_errors=True)
        shimdir = f"{self.work}/shimdir"
        os.makedirs(shimdir, exist_ok=True)
        dst = f"{shimdir}/containerd-shim-rustpod-v1"
        if not os.path.exists(dst):
            os.symlink(self.shim_bin, dst)
        self.ctrd_dir = d
        subprocess.run([f"{HERE}/containerd.sh", "start", d, "--shim-dir", shimdir], check=True)
        self.ctrd_pid = int(open(f"{d}/containerd.pid").read())
        if self.ctrd_pid not in children_pids():
            raise RuntimeError("containerd is not our child: cannot account shim CPU")
        self.sock = f"{d}/containerd.sock"
        img = f"{self.work}/image.tar"
        subprocess.run([f"{HERE}/make-oci-image.sh", IMAGE.split("/")[-1], img], check=True)
        subprocess.run(["ctr", "-a", self.sock, "images", "import", img], check=True, stdout=subprocess.DEVNULL)

    def containerd_stop(self):
        d, self.ctrd_dir = self.ctrd_dir, None
        subprocess.run([f"{HERE}/containerd.sh", "stop", d], check=False)
        try:
            with Deadline(10):
                os.wait4(self.ctrd_pid, 0)
        except (ChildProcessError, Timeout):
            pass
        self.ctrd_pid = None
        # the snapshots are overlay mounts under d; containerd unmounts them on delete
        subprocess.run(["umount", "-R", d], stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(d, ignore_errors=True)

    def ctrd_children_cpu(self):
        """containerd's cutime+cstime (s): the shim `start`/`delete` bootstrap processes it forks and reaps."""
        f = open(f"/proc/{self.ctrd_pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[13]) + int(f[14])) / CLK_TCK

    def ctr(self, *args):
        return ["ctr", "-a", self.sock] + list(args)

    def shim_ok(self):
        if self.a.shim_not_ready:
            return self.a.shim_not_ready
        if not os.access(self.shim_bin, os.X_OK):
            return "containerd-shim-rustpod-v1 did not build"
        return None

    def ctr_run_once(self, runtime, argv=("/bin/true",), expect=0):
        cid = self.cid("ctr")
        Proc.reset()
        c0 = cpu_children()
        k0 = self.ctrd_children_cpu()
        t0 = time.perf_counter()
        ERRFILE.seek(0)
        ERRFILE.truncate()
        pid = spawn(self.ctr("run", "--rm", "--runtime", runtime, IMAGE, cid, *argv))
        code, ru_ctr = wait_pid(pid, 60)
        t1 = time.perf_counter()
        if code != expect:
            raise RuntimeError(f"ctr run --runtime {runtime}: exit {code} (want {expect})\n{errtext()}")
        # the shim daemon was reparented to us: wait until it exits (containerd shuts it down)
        shim = None
        try:
            with Deadline(10):
                shim, st, ru = os.wait4(-1, 0)
        except Timeout:
            pass
        if shim == self.ctrd_pid:
            raise RuntimeError("containerd exited")
        reap_ready()
        time.sleep(0.02)  # containerd reaps the shim `delete` bootstrap asynchronously
        k1 = self.ctrd_children_cpu()
        ours = cpu_children() - c0 - (ru_ctr.ru_utime + ru_ctr.ru_stime)
        return t1 - t0, ours, k1 - k0, ru_ctr.ru_utime + ru_ctr.ru_stime, shim is not None

    def fig_containerd(self):
        why = self.shim_ok()
        if why:
            for f in ("containerd", "shim_memory"):
                self.res["figures"][f] = {"not_measured": f"shim not ready: {why}"}
            log(f"== figures 3, 4: not measured: shim not ready ({why})")
            return
        self.containerd_start()
        shims = {"rustpod": "io.containerd.rustpod.v1", "runc": "io.containerd.runc.v2"}
        try:
            # probe through containerd: PID 1, /proc, exit code 7 comes back through the shim
            script = "[ $$ = 1 ] && grep -q '^proc /proc proc ' /proc/mounts && exit 7; exit 1"
            for name, rtn in shims.items():
                self.ctr_run_once(rtn, ("sh", "-c", script), expect=7)
            n = self.a.pairs
            log(f"== figure 3: ctr run --rm /bin/true, rustpod shim vs runc v2 shim, {n} pairs")
            raw = {name: {"wall_ms": [], "shim_cpu_ms": [], "daemon_cpu_ms": [], "bootstrap_cpu_ms": [], "ctr_cpu_ms": []}
                   for name in shims}
            for _ in range(self.a.warmup):
                for name, rtn in shims.items():
                    self.ctr_run_once(rtn)
            names = list(shims)
            missing_shim = 0
            for i in range(n):
                for name in (names if i % 2 == 0 else names[::-1]):
                    w, daemon, boot, ctrcpu, seen = self.ctr_run_once(shims[name])
                    missing_shim += not seen
                    d = raw[name]
                    d["wall_ms"].append(w * 1e3)
                    d["daemon_cpu_ms"].append(daemon * 1e3)
                    d["bootstrap_cpu_ms"].append(boot * 1e3)
                    d["shim_cpu_ms"].append((daemon + boot) * 1e3)
                    d["ctr_cpu_ms"].append(ctrcpu * 1e3)
            res = {"n": n, "runtimes": {}, "shim_exit_not_seen": missing_shim}
            for name in shims:
                d = raw[name]
                res["runtimes"][name] = {
                    "wall_ms": summary(d["wall_ms"]),
                    "shim_cpu_ms": summary(d["shim_cpu_ms"]),
                    "shim_cpu_ms_mean": statistics.fmean(d["shim_cpu_ms"]),
                    "daemon_cpu_ms": summary(d["daemon_cpu_ms"]),
                    "bootstrap_cpu_ms_mean": statistics.fmean(d["bootstrap_cpu_ms"]),
                    "ctr_cpu_ms": summary(d["ctr_cpu_ms"]),
                    "raw": d}
            rp, rc = raw["rustpod"], raw["runc"]
            res["ratios"] = {"runc": {
                "wall": ratio(statistics.median(rp["wall_ms"]), statistics.median(rc["wall_ms"])),
                "wall_paired": paired_ratio(rp["wall_ms"], rc["wall_ms"]),
                # the bootstrap part is tick-quantised (10 ms) per run: compare means
                "shim_cpu": ratio(statistics.fmean(rp["shim_cpu_ms"]), statistics.fmean(rc["shim_cpu_ms"]))}}
            self.res["figures"]["containerd"] = res
            self.print_fig("containerd")
            self.fig_shim_memory(shims)
        finally:
            self.containerd_stop()

    def shim_procs(self):
        """PIDs of shim processes serving our containerd (their command line names its socket)."""
        out = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and b"containerd-shim" in os.path.basename(cmd[0]) and self.sock.encode() in cmd:
                out.append(int(p))
        return out

    def fig_shim_memory(self, shims):
        pods = 10 if not self.a.quick else 4
        per_pod = 2
        log(f"== figure 4: shim memory with {pods} pods x {per_pod} containers (grouped by {SANDBOX_ANN})")
        res = {"pods": pods, "containers_per_pod": per_pod, "runtimes": {}}
        for name, rtn in shims.items():
            ids = []
            try:
                for p in range(pods):
                    pod = f"rpb-pod-{name}-{p}"
                    for c in range(per_pod):
                        cid = pod if c == 0 else f"{pod}-c{c}"
                        run(self.ctr("run", "-d", "--runtime", rtn, "--annotation", f"{SANDBOX_ANN}={pod}",
                                     "--annotation", f"io.kubernetes.cri.container-type={'sandbox' if c == 0 else 'container'}",
                                     IMAGE, cid, "sleep", "1000000"))
                        ids.append(cid)
                time.sleep(1)
                procs = self.shim_procs()
                rss = pss = 0
                threads = 0
                split = {"RssFile:": 0, "RssAnon:": 0}  # the binary's own pages vs heap and stacks
                for p in procs:
                    st = open(f"/proc/{p}/status").read()
                    rss += int(next(l.split()[1] for l in st.splitlines() if l.startswith("VmRSS:")))
                    threads += int(next(l.split()[1] for l in st.splitlines() if l.startswith("Threads:")))
                    for k in split:
                        split[k] += int(next(l.split()[1] for l in st.splitlines() if l.startswith(k)))
                    sm = open(f"/proc/{p}/smaps_rollup").read()
                    pss += int(next(l.split()[1] for l in sm.splitlines() if l.startswith("Pss:")))
                res["runtimes"][name] = {"shim_processes": len(procs), "shims_per_pod": len(procs) / pods,
                                         "threads": threads,
                                         "rss_kib_total": rss, "pss_kib_total": pss,
                                         "rss_kib_per_pod": rss / pods, "pss_kib_per_pod": pss / pods,
                                         "rss_file_kib_per_pod": split["RssFile:"] / pods, "rss_anon_kib_per_pod": split["RssAnon:"] / pods,
                                         "threads_per_pod": threads / pods}
                log(f"  {name}: {len(procs)} shim processes, RSS {rss / pods / 1024:.1f} MiB/pod, PSS {pss / pods / 1024:.1f} MiB/pod")
            finally:
                for cid in ids:
                    run(self.ctr("task", "kill", "-s", "KILL", cid), check=False)
                for cid in ids:
                    run(self.ctr("task", "delete", cid), check=False)
                    run(self.ctr("container", "delete", cid), check=False)
                self.reap_until_empty(10)
        self.res["figures"]["shim_memory"] = res

    # --- output
    def print_fig(self, fig):
        f = self.res["figures"][fig]
        for name, d in f["runtimes"].items():
            w = d["wall_ms"]
            c = d.get("cpu_ms") or d.get("shim_cpu_ms")
            log(f"  {name:8} wall {w['median']:7.2f} ms [{w['p25']:.2f}..{w['p75']:.2f}]  "
                f"cpu {c['median']:7.2f} ms [{c['p25']:.2f}..{c['p75']:.2f}]")
        for other, r in f.get("ratios", {}).items():
            log(f"  rustpod/{other}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items() if v is not None))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=os.environ.get("CARGO_TARGET_DIR", "/var/tmp/rustpod-target") + "/release")
    ap.add_argument("--pairs", type=int, default=50, help="interleaved rounds per comparison (>= 30 for the report)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="development: 8 rounds, smaller scale figures")
    ap.add_argument("--only", default="cli,exec,syscalls,memlimit,scale,containerd,profile",
                    help="comma list of: cli,exec,syscalls,memlimit,scale,containerd,profile")
    ap.add_argument("--floor-bin", default="/var/tmp/rustpod-bench-floor", help="hack/floor.c, built static")
    ap.add_argument("--host-mount-ns", default="", metavar="RUNTIMES",
                    help="comma list of runtimes (rustpod,runc) to run in the host's mount namespace, "
                         "where cgroup v1 is hybrid, instead of the benchmark's private one")
    ap.add_argument("--out", default=f"{REPO}/bench")
    ap.add_argument("--work", default="/var/tmp/rustpod-bench")
    ap.add_argument("--state", default="/run/rustpod-bench",
                    help="the runtimes' --root dirs: on tmpfs, as /run/runc and /run/crun are on a node")
    ap.add_argument("--containerd-dir", default="/tmp/rpbc")
    ap.add_argument("--shim-not-ready", metavar="REASON", help="skip figures 3 and 4 with this reason")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    a = ap.parse_args()
    if a.quick and "--pairs" not in sys.argv:
        a.pairs = 8
        a.warmup = 1
    only = set(a.only.split(","))
    a.host_mount_ns = [n for n in a.host_mount_ns.split(",") if n]
    if set(a.host_mount_ns) - {"rustpod", "runc"}:
        sys.exit("bench: --host-mount-ns takes rustpod and/or runc (crun 1.8 refuses a hybrid host)")
    if os.geteuid() != 0:
        sys.exit("bench: must run as root")
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("bench: prctl(PR_SET_CHILD_SUBREAPER) failed")
    # Once, before anything is spawned (unshare needs a single-threaded process).
    MountNs.enter_private()
    global ERRFILE
    os.makedirs(a.work, exist_ok=True)
    ERRFILE = open(f"{a.work}/.stderr", "w+")
    global RSS_OUT
    RSS_OUT = f"{a.work}/.maxrss"
    b = Bench(a)
    t0 = time.time()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        b.setup()
        b.probe()
        if "cli" in only:
            b.fig_cli()
        if "exec" in only:
            b.fig_exec()
        if "syscalls" in only:
            b.fig_syscalls()
        if "memlimit" in only:
            b.fig_memlimit()
        if "scale" in only:
            b.fig_scale()
        if "containerd" in only:
            b.fig_containerd()
        if "profile" in only:
            b.fig_profile()
    finally:
        b.cleanup()
    b.res["machine"]["duration_s"] = round(time.time() - t0)
    import bench_report
    bench_report.write(b.res, a.out)


if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in the checkout
    sys.path.insert(0, HERE)
    main()
