#!/usr/bin/env python3
"""Finding records by what they hold (issue 46): `cat MNT/orders/where/<filter>/0/by-offset/0`
against, in the same run, `jq -c 'select(...)'` over the mount's unfiltered stream (what users
of every Kafka tool do today) and `grep -F` of the filter's literal through the mount (the
inexact shortcut), alternating repetitions and printing medians and ratios.

    scripts/bench --where [--records N] [--reps N] [--work DIR]

The data: N records (default 1,000,000) of about 130 bytes of JSON each (100,000 distinct
users, a nested object, an array, 1 % values that are not JSON), each with a key and a header,
appended through a read-write mount (one partition), then read through a read-only mount.
Rows: a rare equality (about N/100,000 matches), a common one (1 %), a numeric range, a
substring, a key and a header. There is no field index yet, so no indexed rows. The daemon's
peak RSS (VmHWM) is printed at the end.
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


def generate(path, n):
    items = ["pen", "cup", "hat", "mug", "box"]
    cities = ["Oslo", "Lima", "Pune", "Kyiv", "Rome"]
    with open(path, "w") as f:
        for i in range(n):
            if i % 100 == 37:
                payload = f"plain text record {i} that is not json"
            else:
                payload = json.dumps(
                    {
                        "id": i,
                        "user": f"user-{(i * 7919) % 100000}",
                        "item": items[i % 5],
                        "qty": i % 100,
                        "bucket": i % 100,
                        "address": {"city": cities[i % 5], "zip": f"{i % 9000 + 1000}"},
                        "tags": [f"t{i % 13}", "x"],
                    },
                    separators=(",", ":"),
                )
            env = {"key": f"k-{i % 50000}", "headers": ["trace", f"tr-{i % 1000}"], "payload": payload}
            f.write(json.dumps(env, separators=(",", ":")) + "\n")


ROWS = [
    # name, filter, jq over value lines (-R, fromjson?), or over .json when it starts with '.json:'
    ("rare equality", "user=user-4242", 'select(.user=="user-4242")', '"user":"user-4242"'),
    ("common equality (1 %)", "bucket=42", "select(.bucket==42)", '"bucket":42,'),
    ("numeric range (2 %)", "qty>97", "select(.qty>97)", None),
    ("substring", "address.zip~777", 'select(.address.zip|contains("777"))', "777"),
    ("key", "@key=k-4242", '.json:select(.key=="k-4242")', '"key":"k-4242"'),
    ("header", "@header.trace=tr-42", '.json:select(.headers[1]=="tr-42")', '"tr-42"'),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--topicfs", required=True)
    p.add_argument("--work", default="/var/tmp/topicfs-bench")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    # Field indexes cover sealed segments (the active one is scanned): with Kafka's default 1 GiB
    # segments a log under that is one active segment, which no index covers.
    p.add_argument("--segment-bytes", type=int, default=None)
    a = p.parse_args()
    work = os.path.join(a.work, "where")
    data, mnt, src = (os.path.join(work, x) for x in ("data", "mnt", "records.jsonl"))
    sh(f"rm -rf {work}")
    os.makedirs(data)
    t0 = time.perf_counter()
    generate(src, a.records)
    mount(a.topicfs, data, mnt,
          *(["--segment-bytes", str(a.segment_bytes)] if a.segment_bytes else []))
    try:
        os.mkdir(os.path.join(mnt, "orders"))
        sh(f"cat {src} > {mnt}/orders/0/append.json")
    finally:
        unmount(a.topicfs, mnt)
    print(f"# {a.records} records in {time.perf_counter() - t0:.1f} s; "
          f"{os.path.getsize(src) / 1e6:.0f} MB of envelopes", flush=True)
    # No cache dir: nothing is kept per segment, so no field index is built (the first filtered
    # read of a field on a mount that keeps them starts its index): these rows scan.
    mount(a.topicfs, data, mnt, "--read-only", "--cache-dir", "none")
    unindexed = {}
    try:
        pid = daemon_pid(mnt)
        base = f"{mnt}/orders/0/by-offset/0"
        # Warm the page cache and the mount's render indexes for both.
        sh(f"cat {base} {base}.json > /dev/null")
        print(f"{'row':<24} {'where (s)':>9} {'jq (s)':>8} {'grep (s)':>8} "
              f"{'jq/where':>9} {'grep/where':>10} {'matches':>8}")
        for name, flt, jq, literal in ROWS:
            where_t, jq_t, grep_t = [], [], []
            matches = None
            stream = f"'{mnt}/orders/where/{flt}/0/by-offset/0'"
            if jq.startswith(".json:"):
                jq_cmd = f"jq -c '{jq[6:]}' {base}.json"
                stream += ".json"
            else:
                jq_cmd = f"jq -cR 'fromjson? | {jq}' {base}"
            grep_cmd = f"grep -F '{literal}' {base}{'.json' if jq.startswith('.json:') else ''}" if literal else None
            for _ in range(a.reps):
                t, n = timed(f"cat {stream}")
                where_t.append(t)
                t, m = timed(jq_cmd)
                jq_t.append(t)
                if n != m:
                    sys.exit(f"{name}: where/ gave {n} records, jq {m}")
                matches = n
                if grep_cmd:
                    t, _ = timed(grep_cmd + " || true")
                    grep_t.append(t)
            w, j = statistics.median(where_t), statistics.median(jq_t)
            g = statistics.median(grep_t) if grep_t else float("nan")
            print(f"{name:<24} {w:>9.3f} {j:>8.3f} {g:>8.3f} {j / w:>9.1f} {g / w:>10.2f} {matches:>8}",
                  flush=True)
            unindexed[name] = (w, matches)
        if pid:
            print(f"# daemon peak RSS (VmHWM): {vm_hwm_mib(pid):.0f} MiB")
    finally:
        unmount(a.topicfs, mnt)
    indexed_rows(a, data, mnt, os.path.join(work, "cache"), unindexed)


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
