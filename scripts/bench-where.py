#!/usr/bin/env python3
"""Finding records by what they hold (issue 46): `cat MNT/orders/where/<filter>/0/by-offset/0`
against, in the same run, `jq -c 'select(...)'` over the mount's unfiltered stream (what users
of every Kafka tool do today) and `grep -F` of the filter's literal through the mount (the
inexact shortcut), alternating repetitions and printing medians and ratios.

    scripts/bench --where [--where-records N] [--reps N] [--work DIR]

The data (the issue's): N records (default 10,000,000; `--where-records` or `--records` for
quick runs) of about 130 bytes of JSON each (100,000 distinct users: half the records go to
1,000 frequent users, half to the 99,000 others, so a rare user has N/200,000 records (tens at
10 M); a nested object, an array, 1 % values that are not JSON), each with a key (50,000
distinct) and a `trace` header (1,000 distinct), written straight into the mount's
`append.json` in 4 MiB writes (no file of envelopes on disk) in one partition, then read
through a read-only mount. Rows: a rare equality, a common one (1 %), a numeric range (2 %), a
substring, a key and a header. Each row kind is a function of ROW_KINDS (the unindexed scan;
others, such as indexed reads, add theirs). The daemon's peak RSS (VmHWM) is printed at the
end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def timed(cmd):
    """Seconds `cmd` takes, its stdout discarded; and its output's line count."""
    start = time.perf_counter()
    out = subprocess.run(cmd, shell=True, check=True, stdout=subprocess.PIPE).stdout
    return time.perf_counter() - start, out.count(b"\n")


def mount(topicfs, data, mnt, *args):
    os.makedirs(mnt, exist_ok=True)
    sh(f"{topicfs} mount {data} {mnt} {' '.join(args)}", stdout=subprocess.DEVNULL)


def unmount(topicfs, mnt):
    sh(f"{topicfs} unmount {mnt}", stdout=subprocess.DEVNULL)


def daemon_pid(mnt):
    out = subprocess.run(["pgrep", "-f", f"topicfs mount .* {mnt}"], stdout=subprocess.PIPE)
    pids = out.stdout.split()
    return int(pids[0]) if pids else None


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


ITEMS = ["pen", "cup", "hat", "mug", "box"]
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Rome"]


def user_of(i):
    """Half the records go to the 1,000 frequent users, half to the 99,000 others."""
    h = (i // 2) * 7919
    return h % 1000 if i % 2 == 0 else 1000 + h % 99000


def value_of(i):
    """Record `i`'s value: about 130 bytes of compact JSON; 1 in 101 not JSON (not 100: a
    rare user's records are 198,000 apart, so 1 in 100 would make all of some users' not JSON)."""
    if i % 101 == 37:
        return f"plain text record {i} that is not json"
    return (
        f'{{"id":{i},"user":"user-{user_of(i)}","item":"{ITEMS[i % 5]}","qty":{i % 100},'
        f'"bucket":{i % 100},"address":{{"city":"{CITIES[i % 5]}","zip":"{i % 9000 + 1000}"}},'
        f'"tags":["t{i % 13}","x"],"ok":true}}'
    )


def envelope(i):
    """Record `i` as an `append.json` line: its key, a `trace` header and the value."""
    payload = value_of(i).replace('"', '\\"')
    return (f'{{"key":"k-{i % 50000}","headers":["trace","tr-{i % 1000}"],'
            f'"payload":"{payload}"}}\n')


def write_records(path, n, chunk=4 << 20):
    """Appends records 0..n to the append file `path` in writes of about `chunk` bytes."""
    with open(path, "ab", buffering=0) as f:
        parts, size = [], 0
        for i in range(n):
            line = envelope(i)
            parts.append(line)
            size += len(line)
            if size >= chunk:
                f.write("".join(parts).encode())
                parts, size = [], 0
        if parts:
            f.write("".join(parts).encode())


# name, filter, jq over value lines (-R, fromjson?) or over `.json` when it starts with
# '.json:', and the literal `grep -F` looks for (None: no literal pins the row).
ROWS = [
    ("rare equality", "user=user-4242", 'select(.user=="user-4242")', '"user":"user-4242"'),
    ("common equality (1 %)", "bucket=42", "select(.bucket==42)", '"bucket":42,'),
    ("numeric range (2 %)", "qty>97", "select(.qty>97)", None),
    ("substring", "address.zip~777", 'select(.address.zip|contains("777"))', "777"),
    ("key", "@key=k-4242", '.json:select(.key=="k-4242")', '"key":"k-4242"'),
    ("header", "@header.trace=tr-42", '.json:select(.headers[1]=="tr-42")', '"tr-42"'),
]


class Ctx:
    """What every row reads: the read-only mount and its unfiltered stream."""

    def __init__(self, mnt, reps):
        self.mnt, self.reps = mnt, reps
        self.base = f"{mnt}/orders/0/by-offset/0"
        # Row name: (median seconds, records) of the unindexed read, for the indexed rows.
        self.unindexed = {}


def where_cmd(ctx, row):
    """`cat` of the filtered stream of `row` (the `.json` one for the `.json:` rows)."""
    _, flt, jq, _ = row
    suffix = ".json" if jq.startswith(".json:") else ""
    return f"cat '{ctx.mnt}/orders/where/{flt}/0/by-offset/0{suffix}'"


def jq_cmd(ctx, row):
    """The `jq` pipeline a user runs over the unfiltered stream for the same records."""
    jq = row[2]
    if jq.startswith(".json:"):
        return f"jq -c '{jq[6:]}' {ctx.base}.json"
    return f"jq -cR 'fromjson? | {jq}' {ctx.base}"


def grep_cmd(ctx, row):
    """`grep -F` of the row's literal through the mount (inexact), or None."""
    literal = row[3]
    if literal is None:
        return None
    suffix = ".json" if row[2].startswith(".json:") else ""
    return f"grep -F '{literal}' {ctx.base}{suffix} || true"


def unindexed_row(ctx, row):
    """The filtered stream as a scan answers it, against `jq` and `grep -F`, alternated."""
    name = row[0]
    where_t, jq_t, grep_t, matches = [], [], [], None
    grep = grep_cmd(ctx, row)
    for _ in range(ctx.reps):
        t, n = timed(where_cmd(ctx, row))
        where_t.append(t)
        t, m = timed(jq_cmd(ctx, row))
        jq_t.append(t)
        if n != m:
            sys.exit(f"{name}: where/ gave {n} records, jq {m}")
        matches = n
        if grep:
            grep_t.append(timed(grep)[0])
    w, j = statistics.median(where_t), statistics.median(jq_t)
    g = statistics.median(grep_t) if grep_t else float("nan")
    print(f"{name:<24} {'scan':<8} {w:>9.3f} {j:>8.3f} {g:>8.3f} {j / w:>9.1f} {g / w:>10.2f} "
          f"{matches:>8}", flush=True)
    ctx.unindexed[name] = (w, matches)


# Row kinds, each a function of (ctx, row) printing its line; run in this order for every row.
ROW_KINDS = [unindexed_row]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--topicfs", required=True)
    p.add_argument("--work", default="/var/tmp/topicfs-bench")
    p.add_argument("--where-records", "--records", dest="records", type=int, default=10_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--segment-bytes", type=int, default=64 << 20,
                   help="segment.bytes of the written log (field indexes cover sealed segments)")
    p.add_argument("--no-indexed", action="store_true", help="skip the indexed rows")
    a = p.parse_args()
    work = os.path.join(a.work, "where")
    data, mnt = (os.path.join(work, x) for x in ("data", "mnt"))
    sh(f"rm -rf {work}")
    os.makedirs(data)
    t0 = time.perf_counter()
    mount(a.topicfs, data, mnt, "--segment-bytes", str(a.segment_bytes))
    try:
        os.mkdir(os.path.join(mnt, "orders"))
        write_records(os.path.join(mnt, "orders/0/append.json"), a.records)
        info = open(os.path.join(mnt, "orders/0/info")).read()
    finally:
        unmount(a.topicfs, mnt)
    size = next((ln.split()[-1] for ln in info.splitlines() if ln.startswith("size_bytes")), "?")
    print(f"# {a.records} records appended in {time.perf_counter() - t0:.1f} s; "
          f"partition size_bytes {size}", flush=True)
    # No cache dir: nothing is kept per segment, so no field index is built (the first filtered
    # read of a field on a mount that keeps them starts its index): these rows scan.
    mount(a.topicfs, data, mnt, "--read-only", "--cache-dir", "none")
    ctx = Ctx(mnt, a.reps)
    try:
        pid = daemon_pid(mnt)
        # Warm the page cache and the mount's render indexes for both.
        sh(f"cat {ctx.base} {ctx.base}.json > /dev/null")
        print(f"{'row':<24} {'kind':<8} {'where (s)':>9} {'jq (s)':>8} {'grep (s)':>8} "
              f"{'jq/where':>9} {'grep/where':>10} {'matches':>8}")
        for row in ROWS:
            for kind in ROW_KINDS:
                kind(ctx, row)
        if pid:
            print(f"# daemon peak RSS (VmHWM): {vm_hwm_mib(pid):.0f} MiB")
    finally:
        unmount(a.topicfs, mnt)
    if not a.no_indexed:
        indexed_rows(a, data, mnt, os.path.join(work, "cache"), ctx.unindexed)


def indexed_rows(a, data, mnt, cache, unindexed):
    """The same reads with field indexes: declared through `orders/indexes` (`echo FIELD >`, so a
    read-write mount: a read-only one refuses writes in the kernel, and its first filtered read of
    a field declares it instead), timed once every field is `ready`."""
    fields = ["user", "bucket", "qty", "address.zip", "@header.trace"]
    os.makedirs(cache, exist_ok=True)
    mount(a.topicfs, data, mnt, "--cache-dir", cache)
    try:
        pid = daemon_pid(mnt)
        t0 = time.perf_counter()
        with open(f"{mnt}/orders/indexes", "w") as f:
            f.write("".join(x + "\n" for x in fields))
        while True:
            with open(f"{mnt}/orders/indexes") as f:
                lines = f.read().splitlines()
            if len(lines) == len(fields) and all(" ready " in l for l in lines):
                break
            time.sleep(0.02)
        build = time.perf_counter() - t0
        size = lambda root, pred: sum(os.path.getsize(os.path.join(d, n))
                                      for d, _, ns in os.walk(root) for n in ns if pred(n))
        index_bytes = size(cache, lambda n: "fields" in n) + size(data, lambda n: "fields" in n)
        log_bytes = size(data, lambda n: n.endswith(".log"))
        print(f"# indexes of {len(fields)} fields built in {build:.2f} s: {index_bytes / 1e6:.1f} MB "
              f"on disk, {100 * index_bytes / max(log_bytes, 1):.1f} % of {log_bytes / 1e6:.0f} MB of log")
        for l in lines:
            print(f"#   {l}")
        print(f"{'row (indexed)':<24} {'where (s)':>9} {'unindexed':>9} {'speedup':>8} {'matches':>8}")
        for name, flt, jq, _ in ROWS:
            stream = f"'{mnt}/orders/where/{flt}/0/by-offset/0{'.json' if jq.startswith('.json:') else ''}'"
            times = []
            for _ in range(a.reps):
                t, n = timed(f"cat {stream}")
                times.append(t)
                if name in unindexed and n != unindexed[name][1]:
                    sys.exit(f"{name}: indexed where/ gave {n} records, unindexed {unindexed[name][1]}")
            w = statistics.median(times)
            u = unindexed.get(name, (float("nan"), 0))[0]
            info = open(f"{mnt}/orders/where/{flt}/0/info").read()
            how = next((l.split(": ", 1)[1] for l in info.splitlines() if l.startswith("answered_by")), "?")
            print(f"{name:<24} {w:>9.3f} {u:>9.3f} {u / w:>8.1f} {n:>8}  {how}", flush=True)
        if pid:
            print(f"# daemon peak RSS (VmHWM): {vm_hwm_mib(pid):.0f} MiB")
    finally:
        unmount(a.topicfs, mnt)


if __name__ == "__main__":
    main()
