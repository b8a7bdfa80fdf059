#!/usr/bin/env python3
"""`sky doctor` contacts only the clouds that have credentials, says "not checked" for the
others, and keeps its table's columns aligned when a cell is long.

Every cloud's endpoint variable points at a listener here that counts connections; only RunPod
has a key. Exactly one connection may arrive (RunPod's probe). RunPod's endpoint is a long URL,
so its cell wraps: every line of the table must leave each column's two separating blanks
blank. Usage: doctor_table.py <sky executable>"""
import os
import socket
import subprocess
import sys
import tempfile
import threading

sky = sys.argv[1]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
listener.settimeout(0.2)
port = listener.getsockname()[1]
connections = []
stop = threading.Event()


def serve():
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        connections.append(conn)
        conn.settimeout(2)
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass
        conn.close()


thread = threading.Thread(target=serve)
thread.start()
base = f"http://127.0.0.1:{port}"
long_url = base + "/" + "a-very-long-path-segment/" * 6
with tempfile.TemporaryDirectory() as home:
    env = {k: v for k, v in os.environ.items()
           if not any(k.startswith(p) for p in ("AWS_", "RUNPOD_", "VAST_", "VERDA_",
                                                 "DATACRUNCH_", "DIGITALOCEAN_"))}
    env.update({
        "HOME": home, "SKY_HOME": home + "/sky",
        "AWS_ENDPOINT_URL": base, "AWS_ENDPOINT_URL_EC2": base,
        "VAST_API_URL": base, "VERDA_API_URL": base, "DIGITALOCEAN_API_URL": base,
        "RUNPOD_API_BASE_URL": long_url, "RUNPOD_API_KEY": "sky-doctor-test-key-9z",
    })
    r = subprocess.run([sky, "doctor"], env=env, capture_output=True, text=True, timeout=60)
stop.set()
thread.join()
listener.close()
out = r.stdout
print(out)
failures = []
if r.returncode != 0:
    failures.append(f"exit status {r.returncode}: {r.stderr}")
if len(connections) != 1:
    failures.append(f"{len(connections)} connections to the endpoints, want 1 (RunPod's)")
if "sky-doctor-test-key-9z" in out:
    failures.append("the key was printed")
lines = out.split("\n")
table = lines[:lines.index("")] if "" in lines else lines
header = table[0]
starts = [header.index(w) for w in ("credentials", "endpoint", "answer")]
rows = {}
for line in table[1:]:
    name = line.split(" ", 1)[0]
    if name:
        rows[name] = line
    for s in starts:
        if line[s - 2:s].strip():
            failures.append(f"a cell runs into the next column at {s}: {line!r}")
for cloud in ("aws", "vastai", "verda", "digitalocean"):
    if cloud not in rows:
        failures.append(f"no row for {cloud}")
    elif "not checked (no credentials)" not in rows[cloud]:
        failures.append(f"{cloud} without credentials is not 'not checked': {rows[cloud]!r}")
if "runpod" not in rows or "answers (HTTP 404)" not in rows["runpod"]:
    failures.append(f"runpod's endpoint was not probed: {rows.get('runpod')!r}")
if not any("a-very-long-path-segment" in l and not l.startswith("runpod") for l in table):
    failures.append("runpod's long endpoint did not wrap onto a line of its own")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
