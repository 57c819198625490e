#!/usr/bin/env python3
"""The machine a run of `benches/run` measured on, and how busy it was: RESULTS_DIR/machine.json.

    python3 benches/machine.py start RESULTS_DIR COMMAND     # before the first section
    python3 benches/machine.py begin RESULTS_DIR SECTION     # around each section
    python3 benches/machine.py end RESULTS_DIR SECTION ok|failed
    python3 benches/machine.py finish RESULTS_DIR            # after the last section

`start` records the CPU, memory, kernel, tools, commit, command, what the virtual machine exposes
of its clock (clock source, TSC flags, frequency scaling) and the load average; each section
records its length, the load average at its start and end and the share of CPU time the
hypervisor gave to others (steal, from /proc/stat); `finish` records the load average at the end.
"""

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path


def output(*command):
    """A command's first line of output (standard output, else standard error), whatever its exit
    status (`wrk --version` exits with 1), or None when it is missing."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError:
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


def read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def output_all(*command):
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def lscpu():
    fields = {}
    for line in (output_all("lscpu") or "").splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


def load_average():
    text = read("/proc/loadavg")
    return [float(value) for value in text.split()[:3]] if text else None


def cpu_times():
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = (read("/proc/stat") or "cpu 0").splitlines()[0].split()[1:]
    values = [int(value) for value in fields]
    # user nice system idle iowait irq softirq steal guest guest_nice: guest time is counted in
    # user and nice already.
    total = sum(values[:8])
    steal = values[7] if len(values) > 7 else 0
    return steal, total


def memory_gib():
    text = read("/proc/meminfo") or ""
    match = re.search(r"MemTotal:\s+(\d+) kB", text)
    return round(int(match.group(1)) / 2**20, 1) if match else None


def cpu_flags():
    text = read("/proc/cpuinfo") or ""
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return set(match.group(1).split()) if match else set()


def frequency_scaling():
    """The cpufreq governor of CPU 0, or None when the kernel exposes no frequency control."""
    return read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def commit():
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    head = done.stdout.strip()
    dirty = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "src", "benches", "Cargo.toml", "Cargo.lock"],
        check=False,
    ).returncode
    return head + (" with uncommitted changes to src/, benches/ or Cargo files" if dirty else "")


def start(command):
    cpu = lscpu()
    flags = cpu_flags()
    os_release = read("/etc/os-release") or ""
    pretty = re.search(r'^PRETTY_NAME="?(.*?)"?$', os_release, re.M)
    steal, total = cpu_times()
    return {
        "cpu": cpu.get("Model name") or platform.processor() or "unknown",
        "logical_cpus": os.cpu_count(),
        "threads_per_core": cpu.get("Thread(s) per core"),
        "hypervisor": cpu.get("Hypervisor vendor"),
        "memory_gib": memory_gib(),
        "kernel": platform.release(),
        "os": pretty.group(1) if pretty else None,
        "rustc": output("rustc", "--version"),
        "valgrind": output("valgrind", "--version"),
        "redis": output("redis-server", "--version"),
        "wrk": (output("wrk", "--version") or "").split(" [")[0].replace("debian/", "") or None,
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": command,
        "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "tsc_flags": sorted(flags & {"constant_tsc", "nonstop_tsc", "tsc_known_freq", "tsc_reliable"}),
        "frequency_governor": frequency_scaling(),
        "load_start": load_average(),
        "cpu_times_start": [steal, total],
        "sections": [],
    }


def main(args):
    if len(args) < 2 or args[0] not in ("start", "begin", "end", "finish"):
        print(__doc__, file=sys.stderr)
        return 2
    action, path = args[0], Path(args[1]) / "machine.json"
    if action == "start":
        path.write_text(json.dumps(start(" ".join(args[2:])), indent=1))
        return 0
    machine = json.loads(path.read_text())
    steal, total = cpu_times()
    if action == "begin":
        machine["sections"].append(
            {"name": args[2], "began": time.time(), "load_start": load_average(), "cpu_times_start": [steal, total]}
        )
    elif action == "end":
        section = next(s for s in reversed(machine["sections"]) if s["name"] == args[2])
        steal_start, total_start = section.pop("cpu_times_start")
        section["seconds"] = round(time.time() - section.pop("began"))
        section["load_end"] = load_average()
        section["steal_percent"] = round(100 * (steal - steal_start) / max(total - total_start, 1), 2)
        section["status"] = args[3] if len(args) > 3 else "ok"
    else:
        steal_start, total_start = machine.pop("cpu_times_start")
        machine["load_end"] = load_average()
        machine["steal_percent"] = round(100 * (steal - steal_start) / max(total - total_start, 1), 2)
    path.write_text(json.dumps(machine, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
