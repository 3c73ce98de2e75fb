# Compares the logs of xcheck/bedl_pac_uci_torch.py with the bench's committed UCI record, split
# by split (both use the data folder's fixed splits), and prints a Markdown table; then, where a
# set has both, He's initial means against the fan-in ones within the PyTorch runs.
# usage (from the repository root): python3 xcheck/compare_uci.py LOG_DIR [RECORD]
#   LOG_DIR: the folder of the logs, named SET-METHOD-INIT.log (method bedl-pac or bedl)
#   RECORD: the bench's uci.json (default assets/uci-bedl/uci.json)
# Standard library only.
import json
import math
import os
import re
import sys

if len(sys.argv) < 2:
    raise SystemExit("usage: compare_uci.py LOG_DIR [RECORD]")
LOGS = sys.argv[1]
RECORD = sys.argv[2] if len(sys.argv) > 2 else "assets/uci-bedl/uci.json"
for path in (LOGS, RECORD):
    if not os.path.exists(path):
        raise SystemExit(f"{path} does not exist")

BENCH_NAMES = {
    "boston": "Boston",
    "concrete": "Concrete",
    "energy": "Energy",
    "kin8nm": "Kin8nm",
    "naval": "Naval",
    "power": "PowerPlant",
    "protein": "Protein",
    "wine": "Wine",
    "yacht": "Yacht",
}
METHODS = {"bedl-pac": "BEDL-PAC", "bedl": "BEDL"}
with open(RECORD) as f:
    record = json.load(f)
bench = {}
for row in record["results"]:
    bench[(row["dataset"], row["method"])] = [s["test_ll"] for s in row["splits"]]

LINE = re.compile(r"^(\w+) ([\w-]+) (\w+) split (\d+): test LL (\S+), RMSE (\S+)")


def mean_se(a):
    m = sum(a) / len(a)
    if len(a) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in a) / (len(a) - 1) / len(a))


runs = {}
for name in sorted(os.listdir(LOGS)):
    if not name.endswith(".log"):
        continue
    ours = {}
    with open(os.path.join(LOGS, name)) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                ours[int(m.group(4))] = float(m.group(5))
                data_set, method, init = m.group(1), m.group(2), m.group(3)
    if ours:
        runs[(data_set, method, init)] = ours

print("| set | method | init | splits | PyTorch | bench | paired difference | z |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for (data_set, method, init), ours in runs.items():
    key = (BENCH_NAMES[data_set], METHODS[method])
    if key not in bench:
        raise SystemExit(f"{RECORD} has no {key[1]} row for {key[0]}")
    splits = sorted(ours)
    torch_ll = [ours[k] for k in splits]
    bench_ll = [bench[key][k] for k in splits]
    tm, ts = mean_se(torch_ll)
    bm, bs = mean_se(bench_ll)
    dm, ds = mean_se([a - b for a, b in zip(torch_ll, bench_ll)])
    print(
        f"| {data_set} | {METHODS[method]} | {init} | {len(splits)} | {tm:.3f} ± {ts:.3f} | {bm:.3f} ± {bs:.3f} "
        f"| {dm:+.3f} ± {ds:.3f} | {dm / ds:+.1f} |"
    )

print()
print("| set | method | splits | He | fan-in | paired difference | z |")
print("|---|---|---:|---:|---:|---:|---:|")
for (data_set, method, init), he in runs.items():
    fanin = runs.get((data_set, method, "fanin"))
    if init != "he" or fanin is None:
        continue
    splits = sorted(set(he) & set(fanin))
    hm, hs = mean_se([he[k] for k in splits])
    fm, fs = mean_se([fanin[k] for k in splits])
    dm, ds = mean_se([he[k] - fanin[k] for k in splits])
    print(
        f"| {data_set} | {METHODS[method]} | {len(splits)} | {hm:.3f} ± {hs:.3f} | {fm:.3f} ± {fs:.3f} "
        f"| {dm:+.3f} ± {ds:.3f} | {dm / ds:+.1f} |"
    )
