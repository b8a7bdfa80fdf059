# An unprivileged user on a node during a pool: watches for every new listening socket (TCP on
# any address, Unix anywhere), connects at once, reads what it is sent and tries to speak; also
# reads every process's command line looking for the pool's secret. Bounded: runs for argv[1]
# seconds, or until the file argv[3] (optional) exists. Prints one line per finding:
#   connected tcp:PORT bytes=N     a TCP listener accepted us (N bytes came before we hung up)
#   connected unix:PATH bytes=N    a Unix socket accepted us
#   refused unix:PATH ERR          the socket refused us (permissions)
#   secret-in-ps PID               a process's argument list holds the secret
import os, socket, sys, time

limit = float(sys.argv[1])
secret = open(sys.argv[2]).read().strip()  # from a file: an argument would be in ps itself
end = time.time() + limit
stop_file = sys.argv[3] if len(sys.argv) > 3 else None
print("attacker uid=%d" % os.getuid(), flush=True)

def listeners():
    out = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(f).read().splitlines()[1:]:
                p = line.split()
                if p[3] == "0A":  # LISTEN
                    out.append(("tcp", int(p[1].split(":")[1], 16)))
        except OSError:
            pass
    try:
        for line in open("/proc/net/unix").read().splitlines()[1:]:
            p = line.split()
            if len(p) >= 8 and p[5] == "01" and p[7].startswith("/"):  # listening, with a path
                out.append(("unix", p[7]))
    except OSError:
        pass
    return out

def probe(kind, where):
    try:
        if kind == "tcp":
            s = socket.create_connection(("127.0.0.1", where), timeout=1)
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(where)
    except OSError as e:
        if kind == "unix":
            print("refused unix:%s %s" % (where, e.strerror), flush=True)
        return
    got = b""
    try:
        s.sendall(b"\x00" * 64)  # something hello-shaped, then read whatever comes
        while len(got) < 65536:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    print("connected %s:%s bytes=%d" % (kind, where, len(got)), flush=True)

seen = set(listeners())  # what was there before the pool (sshd) is not the pool's
while time.time() < end and not (stop_file and os.path.exists(stop_file)):
    for l in listeners():
        if l not in seen:
            seen.add(l)
            probe(*l)
    rounds = globals().get("rounds", 0) + 1
    globals()["rounds"] = rounds
    for pid in (os.listdir("/proc") if rounds % 10 == 0 else ()):
        if pid.isdigit():
            try:
                if secret.encode() in open("/proc/%s/cmdline" % pid, "rb").read():
                    print("secret-in-ps %s" % pid, flush=True)
            except OSError:
                pass
    time.sleep(0.002)
print("attacker done", flush=True)
