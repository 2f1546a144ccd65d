#!/usr/bin/env python3
"""The functions a process ran, for lld's --symbol-ordering-file (see hack/symbol-order.sh).

  symbol_order.py probes BINARY GROUP   uprobe_events lines, one probe per function entry
  symbol_order.py names BINARY GROUP TGID < trace
                                         the functions thread group TGID ran, then those
                                         only other processes of BINARY ran (its helpers,
                                         `shim start`, a container's init before its exec):
                                         mangled, each part in address order
  symbol_order.py shared BINARY GROUP TRACE...
                                         the functions any process ran in the traces of
                                         one or more workloads ("-": stdin): those every
                                         workload ran first, then those of each workload
                                         alone; within that, those more processes ran
                                         first (then in address order), so that each
                                         short-lived process maps the code they all run
                                         and then a short stretch of its own
"""
import re
import subprocess
import sys


def functions(binary):
    """(address, mangled name) of every defined Rust function, by address, one per address.

    Only Rust's (mangled _ZN or _R): a symbol in the statically linked C
    libraries may label a point inside hand-written assembly, where a probe
    would cut an instruction in two.
    """
    out = subprocess.run(["nm", "-S", "--defined-only", binary], check=True, capture_output=True, text=True).stdout
    seen = {}
    for line in out.splitlines():
        fields = line.split(None, 3)
        rust = fields[-1].startswith(("_ZN", "_R"))
        if len(fields) == 4 and fields[2] in "tT" and int(fields[1], 16) > 0 and rust:
            seen.setdefault(int(fields[0], 16), fields[3])
    return sorted(seen.items())


def code_segment(binary):
    """(virtual address, file offset) of the executable LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"] and "E" in fields[6:8]:
            return int(fields[2], 16), int(fields[1], 16)
    sys.exit(f"symbol_order.py: no executable segment in {binary}")


def probes(binary, group):
    vaddr, offset = code_segment(binary)
    for i, (addr, _) in enumerate(functions(binary)):
        print(f"p:{group}/f{i} {binary}:{addr - vaddr + offset:#x}")


def hits(trace):
    """{probe index: the thread groups that entered it} from a trace."""
    # a trace line with record-tgid: "comm-tid (  tgid) [cpu] flags ts: f123: (0x...)"
    event = re.compile(r"\(\s*(\d+)\)\s+\[\d+\].*?\s(f\d+):")
    entered = {}
    for line in trace:
        m = event.search(line)
        if m:
            entered.setdefault(int(m.group(2)[1:]), set()).add(int(m.group(1)))
    return entered


def shared(binary, group, traces):
    processes, workloads = {}, {}
    for w, path in enumerate(traces or ["-"]):
        if path == "-":
            entered = hits(sys.stdin)
        else:
            with open(path) as f:
                entered = hits(f)
        if not entered:
            sys.exit(f"symbol_order.py: no probe hit in {path}")
        for i, tgids in entered.items():
            processes[i] = processes.get(i, 0) + len(tgids)
            workloads.setdefault(i, []).append(w)
    names = [name for _, name in functions(binary)]
    for i in sorted(processes, key=lambda i: (-len(workloads[i]), workloads[i], -processes[i], i)):
        print(names[i])


def names(binary, group, tgid):
    ours, others = set(), set()
    for i, tgids in hits(sys.stdin).items():
        (ours if tgid in tgids else others).add(i)
    if not ours:
        sys.exit(f"symbol_order.py: no probe hit by thread group {tgid}")
    names = [name for _, name in functions(binary)]
    for i in sorted(ours):
        print(names[i])
    for i in sorted(others - ours):
        print(names[i])


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    cmd, binary, group = sys.argv[1:4]
    if cmd == "probes":
        probes(binary, group)
    elif cmd == "names":
        names(binary, group, int(sys.argv[4]))
    elif cmd == "shared":
        shared(binary, group, sys.argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
