"""Output of hack/bench.py: goals, the table (stdout and bench/results.md), bench/results.json, bench/chart.svg."""
import json
import os
import statistics
import sys

COLORS = {"rustpod": "#d9480f", "runc": "#1c7ed6", "crun": "#37b24d", "floor": "#868e96"}
RUNTIMES = ("rustpod", "runc", "crun")


def rss_split(by_process):
    """Each process's peak RSS, largest first: which one sets the figure."""
    return "<br>".join(f"{what} {kib / 1024:.1f} MiB" for what, kib in sorted(by_process.items(), key=lambda kv: -kv[1]))


def _g(d, *path):
    for p in path:
        if d is None:
            return None
        d = d.get(p) if isinstance(d, dict) else None
    return d


CLASSES = (("cli", "the CLI"), ("reexec", "re-execs (hooks)"), ("intermediate", "intermediate"), ("init", "container init"),
           ("program", "/bin/true itself"))


def _split(F, name):
    return _g(F, "syscalls", "runtimes", name, "run_by_process") or {}


def why_cli(F):
    """What is left of a CLI CPU/wall goal, and why, from the run's own per-process syscall split."""
    rp, cr = _split(F, "rustpod"), _split(F, "crun")
    if not rp or not cr:
        return "no per-process syscall split in this run"
    n = lambda d, k: _g(d, k, "calls") or 0
    tot = lambda d: sum(v["calls"] for v in d.values())
    init, cli = rp.get("init", {}), rp.get("cli", {})
    inter = f", intermediate {n(rp, 'intermediate')}" if n(rp, "intermediate") else ""
    top = lambda d, k: ", ".join(f"{s} {c}" for s, c in list((_g(d, k, "by_syscall") or {}).items())[:3])
    ours = n(rp, "reexec") == 0  # no rootfs hook re-exec: the rootfs steps were our own
    init_words = (
        f"our own rootfs steps (a descriptor per mount target, mask and node), then libcontainer's init steps, "
        f"which read and set capabilities one call each"
        + (f" and open /proc/self/cgroup {_g(init, 'opens', 'cgroup')} times" if _g(init, 'opens', 'cgroup') else "")
        + f"; most calls: {top(rp, 'init')} (crun's: {top(cr, 'init')}). "
        if ours else
        f"libcontainer's rootfs steps, each /proc access checked by pathrs ({init.get('statx_fstatfs', 0)} statx+fstatfs). ")
    left = (("Left: the count is at or below crun's, so what the time misses is what the calls cost. "
             + parent_words(F) + profile_words(F) +
             "Of the count, what is left is #22's init driver of our own (the capability sets read and written "
             "whole)"
             if tot(rp) <= tot(cr) else
             "Left: #22's init driver of our own (the capability sets read and written whole), then the CLI's own files")
            if ours else
            "Left: #22 item 2, rootfs steps of our own (one /proc handle)"
            if unified(F) or (_g(cli, 'opens', 'mountinfo') or 0) <= 1
            else "Left: #22 items 2 and 3, rootfs and cgroup steps of our own (one /proc handle; v1 paths resolved once)")
    return (f"`run`: {tot(rp)} syscalls to crun's {tot(cr)}. Init {n(rp, 'init')} (crun {n(cr, 'init')}): "
            + init_words
            + cli_words(n(rp, 'cli'), n(cr, 'cli'), _g(cli, 'opens', 'mountinfo') or 0, _g(cli, 'opens', 'cgroup') or 0,
                        unified(F))
            + f" Hooks' re-execs {n(rp, 'reexec')}{inter}. " + left)


def why_calls(F):
    """What a run's syscalls are, against the moonshot of 500, from the per-process split."""
    rp, cr = _split(F, "rustpod"), _split(F, "crun")
    if not rp or not cr:
        return "no per-process syscall split in this run"
    n = lambda d, k: _g(d, k, "calls") or 0
    top = lambda k: ", ".join(f"{s} {c}" for s, c in list((_g(rp, k, "by_syscall") or {}).items())[:4])
    prctl = (_g(rp, "init", "by_syscall") or {}).get("prctl", 0)
    return (f"The CLI makes {n(rp, 'cli')} (crun {n(cr, 'cli')}; most: {top('cli')}), the init {n(rp, 'init')} "
            f"(crun {n(cr, 'init')}; most: {top('init')}), /bin/true {n(rp, 'program')}. 500 is half of crun's. Left: "
            f"the bounding set goes one PR_CAPBSET_DROP per capability, as crun's does (the init's prctl: {prctl}), a "
            "descriptor per mount target, mask and node, each opened and closed, and the CLI's own state and cgroup "
            "files: both halves would have to be cut in half")


def why_floor(F):
    """What separates a run from the floor (hack/floor.c: the kernel work alone), from figure 8's split."""
    fm = _g(F, "run", "floor_multiple", "crun")
    head = f"crun itself is {fm['wall']:.1f}× / {fm['cpu']:.1f}× the floor (wall / CPU). " if fm else ""
    pr = _g(F, "profile", "runtimes", "rustpod")
    if not pr:
        return head + why_cli(F)
    st, sc = pr.get("by_step_ms", {}), pr["by_syscall_ms"]
    mounts = sum(sc.get(k, 0) for k in ("mount", "fsopen", "fsconfig", "fsmount", "open_tree", "move_mount",
                                          "mount_setattr", "pivot_root", "umount2"))
    return (head + "The floor is the kernel's share alone: it execs no runtime, parses no config, keeps no state "
            "and makes one memory cgroup. Under perf (figure 8) a rustpod run with a cgroupsPath takes "
            f"{pr['total_ms']:.2f} ms: {pr['user_ms']:.2f} in user space, {st.get('page faults', 0):.2f} in page faults, "
            f"{st.get('loading a binary (exec)', 0):.2f} loading binaries, "
            f"{st.get('making cgroups', 0) + st.get('removing cgroups', 0):.2f} making and removing the cgroup in every "
            f"hierarchy, {mounts:.2f} in the rootfs's mounts, {st.get('making the namespaces', 0):.2f} making the "
            "namespaces (which the floor makes too). Left: a runtime's own work, which crun pays as well. "
            + profile_words(F))


def parent_words(F):
    """The default cgroup's share of `run`: figure 1c gives every runtime a cgroupsPath, so none makes a parent."""
    cg = _g(F, "run_cg", "ratios", "crun")
    if not cg:
        return ""
    verdict = "within" if max(cg["wall"], cg["cpu"]) <= 1.0 else "still above"
    return (f"Without `linux.cgroupsPath` rustpod makes and removes the `/rustpod` parent in every hierarchy, "
            f"where crun uses `/<id>` and runc its own cgroup; with one, as containerd, docker and podman set it, "
            f"`run` is {cg['wall']:.2f}× / {cg['cpu']:.2f}× crun's wall / CPU, {verdict} the goal (figure 1c). ")


def unified(F):
    """Whether the run was on cgroup v2 (the sid guest): bench.py records the layout it saw."""
    return F.get("_cgroup") == "v2"


def cli_words(calls, crun_calls, mountinfo, cgroup, v2=False):
    """The CLI's share of a `run`: libcgroups' lookups while it set the cgroups up, or our one read."""
    if v2:
        return (f"CLI {calls} (crun {crun_calls}): it makes the cgroup, writes its limits and clones the init into it "
                f"(clone3 CLONE_INTO_CGROUP), with {mountinfo} /proc/self/mountinfo and {cgroup} cgroup-file opens; "
                "the rest is the state files, the bundle's checks and the sealed binary.")
    if mountinfo <= 1:
        return (f"CLI {calls} (crun {crun_calls}): it sets the cgroups up from one mountinfo read "
                f"({mountinfo} /proc/self/mountinfo and {cgroup} /proc/self/cgroup opens); the rest is the state "
                "files, the bundle's checks and the sealed binary.")
    return (f"CLI {calls} (crun {crun_calls}): it builds libcgroups 0.7's v1 manager to apply the resources, "
            f"which opens /proc/self/mountinfo and /proc/self/cgroup per controller ({mountinfo} "
            f"and {cgroup} times) into a private map.")


def why_exec(F):
    rp, cr = (_g(F, "syscalls", "runtimes", n, "exec_by_process") or {} for n in ("rustpod", "crun"))
    if not rp or not cr:
        return "no per-process syscall split in this run"
    tot = lambda d: sum(v["calls"] for v in d.values())
    cli = rp.get("cli", {})
    return (f"`exec` makes {tot(rp)} syscalls to crun's {tot(cr)}, in {len(rp)} processes (the CLI, the exec'd "
            f"process before and after its execve); the CLI's {cli.get('calls', 0)} include "
            f"{_g(cli, 'opens', 'mountinfo') or 0} /proc/self/mountinfo and {_g(cli, 'opens', 'cgroup') or 0} "
            "/proc/self/cgroup opens. Left: nothing structural; timing noise")


def why_shim_rss(F):
    rt = _g(F, "shim_memory", "runtimes", "rustpod")
    if not rt:
        return "not measured"
    out = (f"{rt['rss_kib_per_pod'] / 1024:.1f} MiB RSS per pod (PSS {rt['pss_kib_per_pod'] / 1024:.1f} MiB), "
           f"{rt['rss_kib_per_pod'] / 1024 - 4:.1f} MiB over")
    if "rss_file_kib_per_pod" not in rt:
        return out
    return (out + f": {rt['rss_file_kib_per_pod'] / 1024:.1f} MiB of it the shim's own binary (64 KiB fault-around per "
            f"page touched; shim/symbol-order.txt packs the server's code and must match the binary, which a release "
            f"hack/build.sh reports), {rt['rss_anon_kib_per_pod'] / 1024:.1f} MiB anon (heap, stacks of "
            f"{rt['threads_per_pod']:g} threads per pod). Left: fewer threads per container (one poll loop for stdio "
            "and OOM events), and code the server runs packed tighter")


def why_memlimit(F):
    ml = _g(F, "memlimit")
    if not ml or not ml["rustpod"]["min_limit_kib"]:
        return "not measured"
    c = ml["crun"]
    cv = f"≤ {c['min_limit_kib']} KiB (the search's floor)" if c["min_limit_kib"] and c["min_limit_kib"] <= c["lower_bound"] else f"{c['min_limit_kib']} KiB"
    out = f"{ml['rustpod']['min_limit_kib']} KiB against crun's {cv}."
    rp, cr = _g(ml, "rustpod", "charged_after_create"), _g(ml, "crun", "charged_after_create")
    if not rp or not cr or "kmem_kib" not in rp or "kmem_kib" not in cr:
        return out + " Why: not analysed"
    out += (f" After `create`, rustpod's container cgroup holds {rp['kmem_kib']} KiB of kernel memory "
            f"({rp['kmem_peak_kib']} KiB peak) against crun's {cr['kmem_kib']} ({cr['kmem_peak_kib']}), {rp['anon_kib']} KiB anon "
            f"against {cr['anon_kib']}, and {rp['cache_kib']} KiB page cache against {cr['cache_kib']}: "
            + ("not the static binary's pages (already in the page cache, charged to whoever read them first) but kernel memory used "
               "while the init runs libcontainer's steps in the cgroup"
               if rp["cache_kib"] <= cr["cache_kib"] else "page cache is part of it"))
    if "traced" not in rp or "traced" not in cr:
        return out + "; which kernel objects: not traced"
    return out + ". " + traced_kmem(rp["traced"], cr["traced"])


# The processes' names in the trace, as a reader knows them.
PROCESS_NAMES = {"rustpod": "the init", "exe": "the rootfs hook, re-executed as /proc/self/exe", "crun": "crun's init"}


def traced_kmem(rp, cr):
    """What the tasks in the container's cgroup allocated during `create`, traced (KmemTrace in bench.py)."""
    total = lambda t: round(sum(t["by_process"].values()))
    procs = ", ".join(f"{kib:g} by {PROCESS_NAMES.get(p, p)}" for p, kib in rp["by_process"].items())
    objects = ", ".join(f"{o} {kib:g} ({cr['by_object'].get(o, 0):g})" for o, kib in list(rp["by_object"].items())[:6])
    return (f"Traced, the tasks in the cgroup allocated {total(rp)} KiB of charged kernel memory during `create` (freed "
            f"included: the peak's), crun's {total(cr)}: {procs}. The largest, with crun's in brackets: {objects}. "
            + ("Left: the hook's re-exec, which owning the rootfs steps removes (issue 22 item 2), the files and "
               "lookups of the engine's checked procfs, and "
               if "exe" in rp["by_process"] else "Left: ")
            + "the forked init's page tables and copied-on-write pages (`pages`, and the anon above), where crun's "
            "init is a small C process")


def why_ctr(F):
    rt = _g(F, "containerd", "runtimes")
    if not rt:
        return "not measured"
    return (f"shim-side CPU {rt['rustpod']['shim_cpu_ms_mean']:.1f} ms against {rt['runc']['shim_cpu_ms_mean']:.1f} ms per "
            "container: each create runs libcontainer's intermediate and init as the CLI's `run` does (see the run goals)")


def why_rss(F):
    rss = {n: _g(F, "lifecycle", "runtimes", n, "peak_rss_kib") for n in ("rustpod", "crun")}
    if not all(rss.values()):
        return "not measured"
    return (f"{rss['rustpod'] / 1024:.1f} MiB against {rss['crun'] / 1024:.1f}, the largest ru_maxrss of any process "
            "of a create+start+wait+delete. Nearly all of it is the binary's code and read-only data, mapped 64 KiB "
            "around each page touched (fault-around); anonymous memory is ~0.35 MiB, as crun's ~0.3 "
            "(bench/README.md). runtime/symbol-order.txt places the Rust functions the lifecycle runs together; "
            "if it is stale (a toolchain or Cargo.lock change), rerun hack/symbol-order.sh rustpod. The statically "
            "linked C code is not ordered")


def syscalls_ratio(F, op):
    rp, cr = (_g(F, "syscalls", "runtimes", n, op, "calls") for n in ("rustpod", "crun"))
    return rp / cr if rp and cr else None


def goals(res):
    """Each goal: what, the measured ratio/value, the target, met (None = not measured), and what is left and why."""
    F = dict(res["figures"], _cgroup=res.get("machine", {}).get("cgroup"))
    out = []

    def add(name, value, target, unit="x", note="", why=None):
        met = None if value is None else value <= target
        out.append({"goal": name, "value": value, "target": target, "unit": unit, "met": met, "note": note,
                    "left": why(F) if met is False and why else ""})

    add("CLI lifecycle (create+start+wait+delete) wall <= 1.0x crun", _g(F, "lifecycle", "ratios", "crun", "wall"), 1.0, why=why_cli)
    add("CLI lifecycle CPU <= 1.0x crun", _g(F, "lifecycle", "ratios", "crun", "cpu"), 1.0, why=why_cli)
    add("run (foreground) wall <= 1.0x crun", _g(F, "run", "ratios", "crun", "wall"), 1.0, why=why_cli)
    add("run (foreground) CPU <= 1.0x crun", _g(F, "run", "ratios", "crun", "cpu"), 1.0, why=why_cli)
    add("exec wall <= 1.0x crun", _g(F, "exec", "ratios", "crun", "wall"), 1.0, why=why_exec)
    add("exec CPU <= 1.0x crun", _g(F, "exec", "ratios", "crun", "cpu"), 1.0, why=why_exec)
    add("syscalls per run of /bin/true <= crun's", syscalls_ratio(F, "run"), 1.0, why=why_cli)
    add("peak RSS of any rustpod process <= crun's", _g(F, "lifecycle", "ratios", "crun", "peak_rss"), 1.0, why=why_rss)
    add("moonshot: syscalls per run of /bin/true <= 500", _g(F, "syscalls", "runtimes", "rustpod", "run", "calls"), 500,
        unit="calls", why=why_calls)
    add("run + delete wall <= 2x the floor", _g(F, "run", "floor_multiple", "rustpod", "wall"), 2.0, why=why_floor)
    add("run + delete CPU <= 2x the floor", _g(F, "run", "floor_multiple", "rustpod", "cpu"), 2.0, why=why_floor)
    add("moonshot: run + delete wall <= 1.5x the floor", _g(F, "run", "floor_multiple", "rustpod", "wall"), 1.5, why=why_floor)
    add("moonshot: run + delete CPU <= 1.5x the floor", _g(F, "run", "floor_multiple", "rustpod", "cpu"), 1.5, why=why_floor)
    nm = _g(F, "containerd", "not_measured")
    add("ctr run --rm: shim-side CPU <= 0.3x runc v2 shim + runc", _g(F, "containerd", "ratios", "runc", "shim_cpu"), 0.3, note=nm or "", why=why_ctr)
    add("ctr run --rm: wall <= 0.7x runc v2 shim", _g(F, "containerd", "ratios", "runc", "wall"), 0.7, note=nm or "", why=why_ctr)
    sm = _g(F, "shim_memory", "runtimes", "rustpod")
    add("shim RSS <= 4 MiB per pod", sm["rss_kib_per_pod"] / 1024 if sm else None, 4.0, "MiB", nm or "", why=why_shim_rss)
    add("one shim process per pod", sm["shims_per_pod"] if sm else None, 1.0, "per pod", nm or "")
    ml = _g(F, "memlimit")
    if ml and ml["rustpod"]["min_limit_kib"] and ml["crun"]["min_limit_kib"]:
        add("smallest memory limit <= crun's", ml["rustpod"]["min_limit_kib"] / ml["crun"]["min_limit_kib"], 1.0, why=why_memlimit)
    else:
        add("smallest memory limit <= crun's", None, 1.0)
    return out


def fmt_ms(s):
    if not s:
        return "–"
    return f"{s['median']:.1f} ms ({s['p25']:.1f}–{s['p75']:.1f})"


def fmt_r(x):
    return "–" if x is None else f"{x:.2f}×"


def table(res):
    F = res["figures"]
    rows = []
    hdr = ["figure", "rustpod", "runc", "crun", "rustpod/runc", "rustpod/crun"]

    def trio(fig, label, key, rkey):
        f = F.get(fig)
        if not f or "runtimes" not in f:
            return
        rt = f["runtimes"]
        rows.append([label] + [fmt_ms(_g(rt, n, key)) for n in ("rustpod", "runc", "crun")] +
                    [fmt_r(_g(f, "ratios", o, rkey)) for o in ("runc", "crun")])

    trio("lifecycle", "1. create+start+wait+delete, wall", "wall_ms", "wall")
    trio("lifecycle", "1. create+start+wait+delete, CPU", "cpu_ms", "cpu")
    if "lifecycle" in F:
        rt = F["lifecycle"]["runtimes"]
        rows.append(["1. lifecycle, peak RSS of any process"] + [f"{rt[n]['peak_rss_kib'] / 1024:.1f} MiB" for n in ("rustpod", "runc", "crun")] +
                    [fmt_r(_g(F, "lifecycle", "ratios", o, "peak_rss")) for o in ("runc", "crun")])
        if all("peak_rss_kib_by_process" in rt[n] for n in ("rustpod", "runc", "crun")):
            rows.append(["1. lifecycle, peak RSS by process"] + [rss_split(rt[n]["peak_rss_kib_by_process"]) for n in ("rustpod", "runc", "crun")] + ["", ""])
    trio("run", "1. run (foreground, deletes), wall", "wall_ms", "wall")
    trio("run", "1. run (foreground, deletes), CPU", "cpu_ms", "cpu")
    trio("run_cg", "1c. run with a cgroupsPath, wall", "wall_ms", "wall")
    trio("run_cg", "1c. run with a cgroupsPath, CPU", "cpu_ms", "cpu")
    trio("run_sd", "1d. run under systemd's cgroup driver, wall", "wall_ms", "wall")
    trio("run_sd", "1d. run under systemd's cgroup driver, CPU", "cpu_ms", "cpu")
    trio("run_userns", "1e. run in a user namespace, wall", "wall_ms", "wall")
    trio("run_userns", "1e. run in a user namespace, CPU", "cpu_ms", "cpu")
    trio("exec", "2. exec /bin/true, wall", "wall_ms", "wall")
    trio("exec", "2. exec /bin/true, CPU", "cpu_ms", "cpu")
    sc = F.get("scale_concurrent")
    if sc:
        trio("scale_concurrent", f"5. {sc['containers']} concurrent run -d: time to all running", "wall_ms", "wall")
        trio("scale_concurrent", f"5. {sc['containers']} concurrent run -d: CPU total", "cpu_ms", "cpu")
    sg = F.get("scale_growth")
    if sg:
        rt = sg["runtimes"]
        cell = lambda n: f"{rt[n]['first_decile_wall_ms']:.1f} → {rt[n]['last_decile_wall_ms']:.1f} ms"
        g = lambda o: fmt_r(rt["rustpod"]["last_decile_wall_ms"] / rt[o]["last_decile_wall_ms"])
        rows.append([f"5. run -d wall, first → last tenth of 1..{sg['max']} running"] + [cell(n) for n in ("rustpod", "runc", "crun")] + [g("runc"), g("crun")])
    ml = F.get("memlimit")
    if ml:
        v = lambda n: "> 64 MiB" if ml[n]["min_limit_kib"] is None else (
            f"≤ {ml[n]['min_limit_kib']} KiB (floor)" if ml[n]["min_limit_kib"] <= ml[n]["lower_bound"] else f"{ml[n]['min_limit_kib']} KiB")
        r = lambda o: fmt_r(ml["rustpod"]["min_limit_kib"] / ml[o]["min_limit_kib"]) if ml["rustpod"]["min_limit_kib"] and ml[o]["min_limit_kib"] else "–"
        rows.append(["6. smallest memory.limit for /bin/true"] + [v(n) for n in ("rustpod", "runc", "crun")] + [r("runc"), r("crun")])
    ct = F.get("containerd")
    if ct and "runtimes" in ct:
        rt = ct["runtimes"]
        rows.append(["3. ctr run --rm /bin/true, wall (shim: rustpod vs runc v2)", fmt_ms(rt["rustpod"]["wall_ms"]), fmt_ms(rt["runc"]["wall_ms"]), "–",
                     fmt_r(ct["ratios"]["runc"]["wall"]), "–"])
        rows.append(["3. shim-side CPU per ctr run (mean)", f"{rt['rustpod']['shim_cpu_ms_mean']:.1f} ms", f"{rt['runc']['shim_cpu_ms_mean']:.1f} ms", "–",
                     fmt_r(ct["ratios"]["runc"]["shim_cpu"]), "–"])
    elif ct:
        rows.append(["3. through containerd", ct["not_measured"], "", "", "", ""])
    sm = F.get("shim_memory")
    if sm and "runtimes" in sm:
        rt = sm["runtimes"]
        rows.append([f"4. shim RSS per pod ({sm['pods']} pods × {sm['containers_per_pod']})", f"{rt['rustpod']['rss_kib_per_pod'] / 1024:.1f} MiB",
                     f"{rt['runc']['rss_kib_per_pod'] / 1024:.1f} MiB", "–", fmt_r(rt["rustpod"]["rss_kib_per_pod"] / rt["runc"]["rss_kib_per_pod"]), "–"])
        rows.append(["4. shim PSS per pod", f"{rt['rustpod']['pss_kib_per_pod'] / 1024:.1f} MiB",
                     f"{rt['runc']['pss_kib_per_pod'] / 1024:.1f} MiB", "–", fmt_r(rt["rustpod"]["pss_kib_per_pod"] / rt["runc"]["pss_kib_per_pod"]), "–"])
        rows.append(["4. shim processes per pod", f"{rt['rustpod']['shims_per_pod']:g}", f"{rt['runc']['shims_per_pod']:g}", "–", "", ""])
    elif sm:
        rows.append(["4. shim memory", sm["not_measured"], "", "", "", ""])
    return hdr, rows


def floor_table(res):
    """run + delete of /bin/true per runtime, and as a multiple of the floor measured in the same rounds."""
    f = _g(res, "figures", "run")
    if not f or "floor_multiple" not in f:
        return None, []
    hdr = ["run + delete of /bin/true", "wall", "CPU", "× floor, wall", "× floor, CPU"]
    rows = [["floor (unshare -fmpuinC, /proc, memcg, chroot, exec)", fmt_ms(f["runtimes"]["floor"]["wall_ms"]),
             fmt_ms(f["runtimes"]["floor"]["cpu_ms"]), "1×", "1×"]]
    for n in RUNTIMES:
        fm = f["floor_multiple"][n]
        rows.append([n, fmt_ms(f["runtimes"][n]["wall_ms"]), fmt_ms(f["runtimes"][n]["cpu_ms"]), fmt_r(fm["wall"]), fmt_r(fm["cpu"])])
    return hdr, rows


def syscall_table(res, top=5):
    """strace -f -c counts: run (with its delete), delete alone, exec; the most frequent calls of run."""
    sc = _g(res, "figures", "syscalls", "runtimes")
    if not sc:
        return None, []
    names = [n for n in RUNTIMES + ("floor",) if n in sc]
    hdr = ["syscalls (strace -f -c)"] + names
    rows = []
    for op, label in (("run", "`run` of /bin/true (deletes on exit)"), ("run_userns", "`run` in a user namespace"),
                      ("delete", "`delete` alone"), ("exec", "`exec` /bin/true")):
        rows.append([label] + [str(sc[n][op]["calls"]) if op in sc[n] else "–" for n in names])
    rows.append([f"most frequent in `run`"] + ["<br>".join(f"{k} {v}" for k, v in list(sc[n]["run"]["by_syscall"].items())[:top]) for n in names])
    return hdr, rows


def profile_diffs(pr, top=6):
    """The syscalls (children included) where rustpod's run spends the most more, and the most less, than crun's."""
    rp, cr = pr["rustpod"]["by_syscall_ms"], pr["crun"]["by_syscall_ms"]
    d = {k: rp.get(k, 0) - cr.get(k, 0) for k in (set(rp) | set(cr)) - {"clone", "clone3"}}
    ranked = sorted(d.items(), key=lambda kv: -kv[1])
    return [kv for kv in ranked[:top] if kv[1] > 0], [kv for kv in ranked[::-1][:top // 2] if kv[1] < 0]


def profile_table(res):
    """Figure 8: a run's CPU by user space, kernel and syscall, from perf."""
    p = _g(res, "figures", "profile")
    if not p or "runtimes" not in p:
        return None, []
    pr = p["runtimes"]
    hdr = [f"perf, ms of CPU per `run` with a cgroupsPath ({p['n']} runs)", "rustpod", "crun", "difference"]
    rows = [[label, f"{pr['rustpod'][k]:.2f}", f"{pr['crun'][k]:.2f}", f"{pr['rustpod'][k] - pr['crun'][k]:+.2f}"]
            for k, label in (("total_ms", "the runtime's processes"), ("user_ms", "user space"), ("kernel_ms", "kernel"))]
    for k, v in pr["rustpod"].get("by_step_ms", {}).items():
        c = pr["crun"]["by_step_ms"].get(k, 0)
        rows.append([k, f"{v:.2f}", f"{c:.2f}", f"{v - c:+.2f}"])
    more, less = profile_diffs(pr)
    for k, d in more + less:
        ours = pr["rustpod"]["by_syscall_ms"].get(k, 0)
        rows.append([f"`{k}` (and what it calls)", f"{ours:.2f}", f"{ours - d:.2f}", f"{d:+.2f}"])
    return hdr, rows


def profile_words(F):
    """What perf says the rest of a run's CPU is, for the goals' "left, and why"."""
    pr = _g(F, "profile", "runtimes")
    if not pr:
        return ""
    rp, cr = pr["rustpod"], pr["crun"]
    more, less = profile_diffs(pr, top=4)
    steps = {k: v - cr.get("by_step_ms", {}).get(k, 0) for k, v in rp.get("by_step_ms", {}).items()}
    more = [kv for kv in sorted(steps.items(), key=lambda kv: -kv[1])[:2] if kv[1] > 0] + more
    fmt = lambda kv: f"{kv[0]} {kv[1]:+.2f}"
    return (f"perf (figure 8, with a cgroupsPath): {rp['total_ms']:.2f} ms per run to crun's {cr['total_ms']:.2f} "
            f"(user {rp['user_ms']:.2f} / {cr['user_ms']:.2f}, kernel {rp['kernel_ms']:.2f} / {cr['kernel_ms']:.2f}); "
            f"most above crun's, in ms per run: {', '.join(map(fmt, more))}; below: {', '.join(map(fmt, less))}. ")


def process_table(res, op="run"):
    """One `run` (or `exec`) of /bin/true under strace -ff: syscalls per process class, and the top 3 of each."""
    F = res["figures"]
    sp = {n: _g(F, "syscalls", "runtimes", n, f"{op}_by_process") for n in RUNTIMES}
    names = [n for n in RUNTIMES if sp[n]]
    if not names:
        return None, []
    hdr = [f"`{op}` of /bin/true by process (strace -ff)"] + names
    rows = []
    for k, label in CLASSES:
        if not any(k in sp[n] for n in names):
            continue
        cell = lambda d: "–" if not d else (f"{d['calls']} ({d['processes']} proc" + (f", {d['threads']} threads" if d["threads"] else "") +
                                            ")<br>" + ", ".join(f"{a} {b}" for a, b in d["top"]))
        rows.append([label] + [cell(sp[n].get(k)) for n in names])
    rows.append(["total"] + [str(sum(v["calls"] for v in sp[n].values())) for n in names])
    if "rustpod" in names:
        for k in ("cli", "intermediate", "init"):
            d = sp["rustpod"].get(k)
            if d:
                rows.append([f"rustpod {k}: /proc/self/mountinfo, /proc/self/cgroup opens; statx+fstatfs",
                             f"{d['opens']['mountinfo']}, {d['opens']['cgroup']}; {d['statx_fstatfs']}"] + [""] * (len(names) - 1))
    return hdr, rows


def fmt_goal(g):
    """The measured value; with more digits where two would round a miss onto the target."""
    if g["value"] is None:
        return None
    d = 2
    while d < 4 and g["met"] is False and round(g["value"], d) <= g["target"]:
        d += 1
    if g["unit"] == "calls":
        return f"{g['value']:.0f} calls"
    return f"{g['value']:.{d}f}" + ("×" if g["unit"] == "x" else f" {g['unit']}")


def left_texts(goals):
    """Each goal's "left, and why", with a reason already given for an earlier goal said as "as above"."""
    said, out = [], []
    for g in goals:
        t = g.get("left", "")
        for p in said:
            if t == p:
                t = "As above."
            elif p in t:
                t = t.replace(p, "Otherwise as above.")
        if g.get("left"):
            said.append(g["left"])
        out.append(t)
    return out


def md_table(hdr, rows):
    return ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(res):
    hdr, rows = table(res)
    m = res["machine"]
    ns = m.get("mount_ns", {})
    hybrid = m.get("cgroup", "").startswith("v1")
    where = (("every runtime in one private mount namespace" + (" without /sys/fs/cgroup/unified" if hybrid else "")
              + ", entered once, no wrapper")
             if len(set(ns.values())) == 1 else "mount namespaces: " + ", ".join(f"{k} {v}" for k, v in ns.items()))
    where += f", --root dirs on {m['state_fs']}" if m.get("state_fs") else ""
    lines = [f"Measured {m['date']} on {m['os']}, kernel {m['kernel']}, {m['cpus']} × {m['cpu_model']}, "
             f"{m['mem_gib']} GiB, cgroup {m['cgroup']}; " + ", ".join(f"{k} `{v}`" for k, v in m["versions"].items()) +
             f". {_g(res, 'figures', 'lifecycle', 'n') or '?'} interleaved rounds; median (p25–p75); "
             f"{where}. Run took {m.get('duration_s', '?')} s.", ""]
    lines += md_table(hdr, rows)
    for h, r in (floor_table(res), syscall_table(res), process_table(res), process_table(res, "exec"), profile_table(res)):
        if h:
            lines += [""] + md_table(h, r)
    lines += ["", "| goal | measured | target | met | left, and why |", "|---|---|---|---|---|"]
    for g, left in zip(res["goals"], left_texts(res["goals"])):
        v = "not measured" + (f" ({g['note']})" if g["note"] else "") if g["value"] is None else fmt_goal(g)
        t = f"≤ {g['target']:g}" + ("×" if g["unit"] == "x" else f" {g['unit']}")
        met = "–" if g["met"] is None else ("yes" if g["met"] else "**no**")
        lines.append(f"| {g['goal']} | {v} | {t} | {met} | {left} |")
    return "\n".join(lines) + "\n"


def text_rows(hdr, rows):
    rows = [[str(c).replace("<br>", ", ") for c in r] for r in rows]
    w = [max(len(r[i]) for r in [hdr] + rows) for i in range(len(hdr))]
    out = ["  ".join(str(c).ljust(w[i]) for i, c in enumerate(hdr)), "  ".join("-" * x for x in w)]
    return out + ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows] + [""]


def text_table(res):
    out = text_rows(*table(res))
    for h, r in (floor_table(res), syscall_table(res), process_table(res), process_table(res, "exec"), profile_table(res)):
        if h:
            out += text_rows(h, r)
    for g, left in zip(res["goals"], left_texts(res["goals"])):
        v = "not measured" if g["value"] is None else fmt_goal(g).replace("×", "x")
        out.append(f"{'MET ' if g['met'] else ('--  ' if g['met'] is None else 'MISS')}  {g['goal']}: {v}")
        if left:
            out.append(f"      left, and why: {left}")
    return "\n".join(out)


def chart(res, path):
    import matplotlib
    matplotlib.use("Agg")
    # Text as text and stable ids: a small file that changes only with the data.
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "rustpod-bench"
    matplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans"]  # one family per <text>, not twelve
    import matplotlib.pyplot as plt
    F = res["figures"]
    panels = []
    for fig, title in (("lifecycle", "1. create+start+wait+delete"), ("run", "1. run (foreground)"), ("exec", "2. exec /bin/true")):
        if fig in F:
            panels.append(("box", fig, "wall_ms", f"{title}: wall (ms)"))
            panels.append(("box", fig, "cpu_ms", f"{title}: CPU (ms)"))
    if "runtimes" in F.get("containerd", {}):
        panels.append(("box", "containerd", "wall_ms", "3. ctr run --rm: wall (ms)"))
        panels.append(("box", "containerd", "shim_cpu_ms", "3. shim-side CPU per run (ms)"))
    if "scale_concurrent" in F:
        panels.append(("box", "scale_concurrent", "wall_ms", f"5. {F['scale_concurrent']['containers']} concurrent: time to all running (ms)"))
    if "scale_growth" in F:
        panels.append(("growth", "scale_growth", None, "5. run -d wall (ms) vs own containers running"))
    if "runtimes" in F.get("shim_memory", {}):
        panels.append(("shimmem", "shim_memory", None, "4. shim memory per pod (MiB)"))
    if "memlimit" in F:
        panels.append(("memlimit", "memlimit", None, "6. smallest memory.limit (KiB)"))
    if not panels:
        return
    cols = 4
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, (kind, f, key, title) in zip(axes.flat, panels):
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        if kind == "box":
            names = list(F[f]["runtimes"])
            data = [F[f]["runtimes"][n]["raw"][key] for n in names]
            # Boxes only: the raw samples are in results.json, and a dot per
            # sample made the chart hundreds of KiB.
            bp = ax.boxplot(data, showfliers=False, widths=0.5, medianprops={"color": "black"}, patch_artist=True)
            for patch, n in zip(bp["boxes"], names):
                patch.set_facecolor(COLORS.get(n, "gray"))
                patch.set_alpha(0.55)
            labels = [n if f != "containerd" else ("rustpod shim" if n == "rustpod" else "runc v2 shim") for n in names]
            ax.set_xticks(range(1, len(names) + 1), labels)
            ax.set_ylim(bottom=0)
        elif kind == "growth":
            for n, d in F[f]["runtimes"].items():
                k = 5
                ys = d["raw"]["wall_ms"]
                sm = [statistics.median(ys[max(0, i - k):i + k + 1]) for i in range(len(ys))]
                ax.plot(d["raw"]["running_before"], sm, "-", color=COLORS[n], label=n)
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        elif kind == "shimmem":
            rt = F[f]["runtimes"]
            names = list(rt)
            x = range(len(names))
            ax.bar([i - 0.2 for i in x], [rt[n]["rss_kib_per_pod"] / 1024 for n in names], 0.4, label="RSS", color=[COLORS[n] for n in names])
            ax.bar([i + 0.2 for i in x], [rt[n]["pss_kib_per_pod"] / 1024 for n in names], 0.4, label="PSS", color=[COLORS[n] for n in names], alpha=0.5)
            ax.axhline(4, ls="--", color="gray", lw=0.8)
            ax.set_xticks(list(x), [("rustpod shim" if n == "rustpod" else "runc v2 shim") + f"\n{rt[n]['shims_per_pod']:g} shim/pod" for n in names])
            ax.legend(fontsize=7)
        elif kind == "memlimit":
            d = F[f]
            names = list(d)
            vals = [d[n]["min_limit_kib"] or d[n]["upper_bound"] for n in names]
            ax.bar(names, vals, color=[COLORS[n] for n in names])
            for i, v in enumerate(vals):
                floor = d[names[i]]["min_limit_kib"] and v <= d[names[i]]["lower_bound"]
                ax.text(i, v, f"{'≤' if floor else ''}{v}", ha="center", va="bottom", fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    m = res["machine"]
    fig.suptitle(f"rustpod vs runc vs crun — {m['date']}, {m['cpus']} CPUs, {m['os']}, kernel {m['kernel']} (lower is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def write(res, out):
    os.makedirs(out, exist_ok=True)
    res["goals"] = goals(res)
    with open(f"{out}/results.json", "w") as f:
        json.dump(res, f, indent=1)
    with open(f"{out}/results.md", "w") as f:
        f.write(markdown(res))
    try:
        chart(res, f"{out}/chart.svg")
    except ImportError as e:
        print(f"bench: no chart ({e}); run through hack/bench, which installs matplotlib", file=sys.stderr)
    print(text_table(res))
    print(f"\nwrote {out}/results.json, {out}/results.md, {out}/chart.svg", file=sys.stderr)


if __name__ == "__main__":
    # re-render from a results.json: python3 bench_report.py bench/results.json OUTDIR
    with open(sys.argv[1]) as f:
        r = json.load(f)
    write(r, sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(sys.argv[1]))
