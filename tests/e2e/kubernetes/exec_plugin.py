#!/usr/bin/env python3
"""A kubeconfig user's exec credential plugin, as client-go runs one (client-authentication v1):
it checks the KUBERNETES_EXEC_INFO it is given, counts its runs in a file, and prints an
ExecCredential with a client certificate and key read from files (the namespaced test user's).

usage: exec_plugin.py API_VERSION RUNS_FILE CERT_FILE KEY_FILE
"""
import json
import os
import sys


def main() -> int:
    api_version, runs, cert, key = sys.argv[1:5]
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO", "null") or "null")
    if not isinstance(info, dict) or info.get("kind") != "ExecCredential":
        print("exec_plugin: no ExecCredential in KUBERNETES_EXEC_INFO", file=sys.stderr)
        return 3
    if info.get("apiVersion") != api_version:
        print("exec_plugin: KUBERNETES_EXEC_INFO has apiVersion %r" % info.get("apiVersion"),
              file=sys.stderr)
        return 4
    if info.get("spec", {}).get("interactive") is not False:
        print("exec_plugin: sky must run plugins non-interactively", file=sys.stderr)
        return 5
    with open(runs, "a", encoding="ascii") as f:
        f.write("run\n")
    with open(cert, encoding="ascii") as c, open(key, encoding="ascii") as k:
        status = {"clientCertificateData": c.read(), "clientKeyData": k.read()}
    print(json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
