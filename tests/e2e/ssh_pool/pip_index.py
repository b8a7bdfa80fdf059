# A private pip index (PEP 503) for the tests of review r4 M2: it serves one small wheel,
# skytokpkg 1.0, under /simple/ only to requests with HTTP Basic credentials "sky:<token>", and
# an empty index without credentials under /public/simple/ (so that pip needs nothing from the
# internet). Bounded: serves for argv[4] seconds, or until the file argv[5] (optional) exists.
#   pip_index.py ADDRESS PORT_FILE TOKEN_FILE SECONDS [STOP_FILE]
# Prints "served <path> auth=<yes|no>" per request (never the token).
import base64, hashlib, http.server, io, os, socketserver, sys, threading, time, zipfile

address, port_file, token_file, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
token = open(token_file).read().strip()  # from a file: an argument would be in ps itself
wanted = "Basic " + base64.b64encode(("sky:" + token).encode()).decode()


def wheel():
    files = {
        "skytokpkg/__init__.py": b"VALUE = 4242\n",
        "skytokpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: skytokpkg\nVersion: 1.0\n",
        "skytokpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sky-test\n"
                                          b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (name, digest, len(data))
    record += "skytokpkg-1.0.dist-info/RECORD,,\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("skytokpkg-1.0.dist-info/RECORD", record)
    return out.getvalue()


WHEEL = wheel()
WHEEL_NAME = "skytokpkg-1.0-py3-none-any.whl"
WHEEL_SHA = hashlib.sha256(WHEEL).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        authorized = self.headers.get("Authorization") == wanted
        print("served %s auth=%s" % (self.path, "yes" if authorized else "no"), flush=True)
        if self.path.startswith("/public/"):
            return self.send_error(404)
        if not authorized:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="sky"')
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if self.path.rstrip("/") == "/simple/skytokpkg":
            body = ('<html><body><a href="/files/%s#sha256=%s">%s</a></body></html>'
                    % (WHEEL_NAME, WHEEL_SHA, WHEEL_NAME)).encode()
            ctype = "text/html"
        elif self.path == "/files/" + WHEEL_NAME:
            body, ctype = WHEEL, "application/octet-stream"
        else:
            return self.send_error(404)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server((address, 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(port_file + ".tmp", port_file)
threading.Thread(target=server.serve_forever, daemon=True).start()
stop_file = sys.argv[5] if len(sys.argv) > 5 else None
end = time.time() + seconds
while time.time() < end and not (stop_file and os.path.exists(stop_file)):
    time.sleep(0.1)
server.shutdown()
print("index done", flush=True)
