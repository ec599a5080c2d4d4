#!/usr/bin/env python3
"""Nearest requests one at a time against a running server, to tell cold from warm.

    scripts/nearest-time.py DB PORT [N] [PASSES]

Picks N (60) random live kernel entries of the bench machines (`bench-*`, as
`scripts/load-bench.sh` builds them; any machine when there are none) from the SQLite file DB
(read only) and asks `GET /api/v1/nearest?entry=M:KEY` of the server on 127.0.0.1:PORT for each,
PASSES (4) times in the same order: pass 0 is what a first visit costs after the server started
or something landed, the later passes what kept candidates save. Prints mean / median / max ms
per pass. Figures only: it never fails on time.
"""
import random
import sqlite3
import statistics
import sys
import time
import urllib.parse
import urllib.request

db, port = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 60
passes = int(sys.argv[4]) if len(sys.argv) > 4 else 4
c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
q = """SELECT m.name, e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id
       WHERE e.kernel IS NOT NULL AND e.removed_at IS NULL AND e.kind = 'kernel' AND m.name LIKE ?"""
rows = c.execute(q, ("bench-%",)).fetchall() or c.execute(q, ("%",)).fetchall()
random.seed(7)
sample = random.sample(rows, min(n, len(rows)))


def one(m, k):
    t = time.perf_counter()
    entry = urllib.parse.quote(f"{m}:{k}")
    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/nearest?entry={entry}").read()
    return (time.perf_counter() - t) * 1000


for p in range(passes):
    ts = [one(m, k) for m, k in sample]
    print(f"pass {p}: {len(ts)} requests, mean {statistics.mean(ts):.1f} ms, "
          f"median {statistics.median(ts):.1f}, max {max(ts):.1f}")
