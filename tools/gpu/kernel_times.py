#!/usr/bin/env python3
"""Per-kernel times from an Nsight Compute CSV log (tools/gpu/kernel_times.sh): for each kernel, how
many launches, and the median, smallest and largest duration in microseconds, in order of first
launch. The medians say where an encode's time goes; the spread shows warm-up launches.

usage: kernel_times.py NCU_CSV
"""
import csv
import re
import statistics
import sys

from summarize import table

# Nsight Compute's duration units; anything else is taken as nanoseconds.
MICROSECONDS_PER_UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}


def short_name(name):
    """'void ns::<unnamed>::collect_kernel<1>(const float *, ...)' -> 'collect_kernel<1>'; a
    library kernel keeps its name without the template arguments."""
    name = re.sub(r"\(.*", "", name).replace("void ", "")
    library = re.match(r"[\w:]*::(\w+Kernel)<", name)
    if library:
        return library.group(1)
    return name.split("::")[-1]


def main():
    lines = [line for line in open(sys.argv[1], errors="replace") if line.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 2:
        print("no kernel timed")
        return 1
    header, rows = rows[0], rows[1:]
    name_at, value_at = header.index("Kernel Name"), header.index("Metric Value")
    unit_at = header.index("Metric Unit")
    times = {}
    for row in rows:
        scale = MICROSECONDS_PER_UNIT.get(row[unit_at], 1e-3)
        value = float(row[value_at].replace(",", "")) * scale
        times.setdefault(short_name(row[name_at]), []).append(value)
    rows = [("kernel", "launches", "median us", "min us", "max us")]
    for name, values in times.items():
        rows.append((name, len(values), "%.1f" % statistics.median(values), "%.1f" % min(values),
                     "%.1f" % max(values)))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
