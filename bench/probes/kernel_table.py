"""Sums Nsight Compute's per-kernel durations (ncu --csv --metrics gpu__time_duration.sum)
by kernel name: the top kernels of one profiled step and the step's total GPU time."""
import collections, csv, sys

rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
cols = rows[head]
name_i, value_i, unit_i = cols.index("Kernel Name"), cols.index("Metric Value"), cols.index("Metric Unit")
total, per, count = 0.0, collections.Counter(), collections.Counter()
for r in rows[head + 1:]:
    if len(r) <= value_i or not r[value_i]:
        continue
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(r[unit_i], 1.0)
    us = float(r[value_i].replace(",", "")) * scale
    name = r[name_i][:90]
    per[name] += us
    count[name] += 1
    total += us
print(f"{sys.argv[1]}: {sum(count.values())} kernels, {total / 1e3:.2f} ms of GPU time")
for name, us in per.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 25):
    print(f"{us / 1e3:9.3f} ms {count[name]:5d}x  {name}")
