# An unprivileged user watching every process's command line for a secret (read from a file: an
# argument would be in ps itself), as `ps -ef` would show it to them. Bounded: argv[1] seconds, or until the file argv[3]
# (optional) exists.
# Prints "watcher uid=N", one "secret-in-ps PID" per process whose argument list holds the
# secret, and "watcher done scans=N".
import os, sys, time

limit = float(sys.argv[1])
secret = open(sys.argv[2]).read().strip().encode()
stop_file = sys.argv[3] if len(sys.argv) > 3 else None
end = time.time() + limit
print("watcher uid=%d" % os.getuid(), flush=True)
seen, scans = set(), 0
while time.time() < end and not (stop_file and os.path.exists(stop_file)):
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid in seen:
            continue
        try:
            if secret in open("/proc/%s/cmdline" % pid, "rb").read():
                seen.add(pid)
                print("secret-in-ps %s" % pid, flush=True)
        except OSError:
            pass
    scans += 1
    time.sleep(0.005)
print("watcher done scans=%d" % scans, flush=True)
