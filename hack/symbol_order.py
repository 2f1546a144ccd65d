#!/usr/bin/env python3
"""The functions a process ran, for lld's --symbol-ordering-file (see hack/shim-symbol-order.sh).

  symbol_order.py probes BINARY GROUP   uprobe_events lines, one probe per function entry
  symbol_order.py names BINARY GROUP TGID < trace
                                         the functions thread group TGID ran, then those
                                         only other processes of BINARY ran (its helpers,
                                         `shim start`, a container's init before its exec):
                                         mangled, each part in address order
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


def names(binary, group, tgid):
    # a trace line with record-tgid: "comm-tid (  tgid) [cpu] flags ts: f123: (0x...)"
    event = re.compile(r"\(\s*(\d+)\)\s+\[\d+\].*?\s(f\d+):")
    ours, others = set(), set()
    for line in sys.stdin:
        m = event.search(line)
        if m:
            (ours if int(m.group(1)) == tgid else others).add(int(m.group(2)[1:]))
    if not ours:
        sys.exit(f"symbol_order.py: no probe hit by thread group {tgid}")
    names = [name for _, name in functions(binary)]
    for i in sorted(ours):
        print(names[i])
    for i in sorted(others - ours):
        print(names[i])


def main():
    cmd, binary, group = sys.argv[1:4]
    if cmd == "probes":
        probes(binary, group)
    elif cmd == "names":
        names(binary, group, int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
