#pragma once
// The sky::SSH provider for a set of test hosts, as every SSH test needs it: node i is host i,
// root, the hosts' shared client key, and a known_hosts file pinning each host's key.
#include "hosts/test_hosts.hpp"
#include "sky/providers.hpp"

namespace sky::test {

inline sky::SSH ssh_provider(const TestHosts& h) {
    sky::SSH ssh;
    for (int i = 0; i < h.size(); ++i) ssh.hosts.push_back(h.address(i));
    ssh.user = h.user();
    ssh.port = h.port(0);
    ssh.identity_file = h.client_key_path().string();
    ssh.known_hosts = h.known_hosts_file().string();
    return ssh;
}

}  // namespace sky::test
