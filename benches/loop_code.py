#!/usr/bin/env python3
"""Whether benchmark binaries run the same machine code for a timed loop.

    python3 benches/loop_code.py REGEX [BINARY...]

Without BINARY, builds the benchmarks and the probes as `benches/run` does (`cargo build -p
tollgate-peers --profile bench --bins --benches`) and takes every executable that builds for
measuring (the criterion benchmarks and the probes, not the unit-test harnesses). For each
binary (built with debug info, as the bench profile does), finds every function whose
DWARF name matches REGEX (e.g. 'decide_direct<governor.*QuantaUpkeepClock'; the loops of
`benches/peers/src/timing.rs` are named `decide_direct<LIMITER>` and so on), disassembles it
with `objdump`, blanks what linking moves (its own address, call and jump targets' addresses,
rip-relative offsets and their targets, symbol hashes) and prints its symbol, size and a digest
of what is left. The same digest in every binary is the same code. (A binary that never times a
type holds no loop for it: linking drops it.) Needs `llvm-dwarfdump` and `objdump`. Exits 1
when a matched loop's code differs between binaries, or nothing matched.
"""

import hashlib
import json
import re
import subprocess
import sys

ADDRESS = re.compile(r"^\s*[0-9a-f]+:\s*")
TARGET = re.compile(r"\b[0-9a-f]+ <")
RIP = re.compile(r"-?0x[0-9a-f]+\(%rip\)")
COMMENT = re.compile(r"\s*# <.*>$")
HASH = re.compile(r"17h[0-9a-f]{16}E")


def loops(binary, pattern):
    """[(DWARF name, linkage name, low pc, high pc)] of the linked functions whose name matches."""
    dump = subprocess.run(
        ["llvm-dwarfdump", "--debug-info", "--regex", f"--name={pattern}", binary],
        check=True, capture_output=True, text=True,
    ).stdout
    found = []
    for die in dump.split("\n\n"):
        fields = dict(re.findall(r"DW_AT_(\w+)\s+\(\"?(.*?)\"?\)$", die, re.M))
        if {"name", "linkage_name", "low_pc", "high_pc"} <= fields.keys():
            low, high = int(fields["low_pc"], 16), int(fields["high_pc"], 16)
            # A function the linker dropped keeps its debug info, at address 0.
            if low:
                found.append((fields["name"], fields["linkage_name"], low, high))
    return found


def normalized(binary, low, high):
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", f"--start-address={low}", f"--stop-address={high}", binary],
        check=True, capture_output=True, text=True,
    ).stdout
    body = [line for line in text.splitlines() if re.match(r"^\s*[0-9a-f]+:\t", line)]
    blank = [COMMENT.sub("", RIP.sub("X(%rip)", TARGET.sub("<", ADDRESS.sub("", line)))) for line in body]
    return "\n".join(HASH.sub("17h_E", line) for line in blank)


def built_binaries():
    """The criterion benchmarks and the probes, built as `benches/run` builds them."""
    command = ["cargo", "build", "-p", "tollgate-peers", "--profile", "bench", "--bins", "--benches"]
    out = subprocess.run(command + ["--message-format=json"], check=True, capture_output=True, text=True).stdout
    binaries = []
    for line in out.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        kind, test = message["target"]["kind"], message["profile"]["test"]
        if kind == ["bench"] or (kind == ["bin"] and not test):
            binaries.append(message["executable"])
    return sorted(binaries)


def main(args):
    if not args:
        print(__doc__)
        return 2
    pattern, binaries = args[0], args[1:] or built_binaries()
    found = {}
    for binary in binaries:
        for name, linkage, low, high in loops(binary, pattern):
            digest = hashlib.sha256(normalized(binary, low, high).encode()).hexdigest()[:16]
            found.setdefault(name, []).append((binary, linkage, high - low, digest))
    differ = 0
    for name, copies in sorted(found.items()):
        # Two functions of one name in one binary (a regex without `<` also matches the
        # `DirectLoops`/`KeyedLoops` methods, all named `decide_*`) compare nothing.
        same = len({digest for *_, digest in copies}) == 1 and len({c[0] for c in copies}) == len(copies)
        differ += not same
        print(f"{name}: {'same code' if same else 'DIFFERENT code'} in {len(copies)} of {len(binaries)} binaries")
        for binary, linkage, size, digest in copies:
            print(f"    {binary}: {linkage}, 0x{size:x} bytes, code {digest}")
    print(f"{len(found)} loops matched, {differ} with different code in different binaries")
    return 1 if differ or not found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
