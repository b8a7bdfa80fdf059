#!/usr/bin/env python3
"""`sky ls` shows each pool's spend and its budget's limits as its ledger last recorded them.

A private SKY_HOME holds three ledgers of pools whose owner is gone and which left a machine:
one with a budget and two cost records (the last counts), one with only an hourly limit, one
with neither (its cells say "-"). Usage: ls_spend.py <sky executable>"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sky = sys.argv[1]
home = tempfile.mkdtemp(prefix="sky-ls-spend-")
try:
    pools = os.path.join(home, "sky", "pools")
    os.makedirs(pools, mode=0o700)
    os.chmod(os.path.join(home, "sky"), 0o700)

    def ledger(pool, *records):
        path = os.path.join(pools, pool + ".jsonl")
        head = {"sky_ledger": 1, "type": "pool", "pool": pool, "provider": "simulated",
                "pid": 999999999, "started": 1700000000}
        lines = [head, {"type": "instance", "id": "i-" + pool}] + list(records)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in lines))

    ledger("p-both", {"type": "budget", "max_total_usd": 40, "max_hourly_usd": 6},
           {"type": "cost", "spent_usd": 0.5, "at": 1700000010},
           {"type": "cost", "spent_usd": 1.23456, "at": 1700000020})
    ledger("p-hourly", {"type": "budget", "max_total_usd": 0, "max_hourly_usd": 2.5},
           {"type": "cost", "spent_usd": 0.01, "at": 1700000010})
    ledger("p-none")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "RUNPOD_", "VAST_", "VERDA_", "DATACRUNCH_",
                                "DIGITALOCEAN_"))}
    env.update(SKY_HOME=os.path.join(home, "sky"), HOME=home)
    out = subprocess.run([sky, "ls"], env=env, capture_output=True, text=True, timeout=60)
    print(out.stdout)
    print(out.stderr, file=sys.stderr)
    lines = out.stdout.splitlines()
    header = next((l for l in lines if l.startswith("POOL")), None)
    assert header is not None, "no pool table"
    assert "SPENT" in header and "LIMIT" in header, header

    def cells(pool):
        row = next((l for l in lines if l.startswith(pool + " ")), None)
        assert row is not None, "no row for " + pool
        at = header.index("SPENT")
        return row[at:].split()

    both = cells("p-both")
    assert both[0] == "$1.2346", both
    assert both[1:4] == ["$40.00,", "$6.00/h", "1:"], both
    hourly = cells("p-hourly")
    assert hourly[0:2] == ["$0.0100", "$2.50/h"], hourly
    none = cells("p-none")
    assert none[0:2] == ["-", "-"], none
    print("ok: spend and limits shown")
finally:
    shutil.rmtree(home, ignore_errors=True)
