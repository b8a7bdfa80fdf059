// Host-key pinning helpers: fingerprints of public keys and known_hosts lookups.
#include "ssh/host_key.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ssh/session.hpp"
#include "util/digest.hpp"
#include "util/encoding.hpp"
#include "util/text.hpp"

namespace sky::detail::ssh {

std::string fingerprint_of_blob(std::string_view blob) {
    return "SHA256:" + base64_encode(sha256(blob), /*pad=*/false);
}

namespace {

// Base64 from a file, or nullopt when it is not base64 (a line to skip, not an error).
std::optional<std::string> decode_base64(std::string_view text) {
    try {
        return base64_decode(text);
    } catch (const sky::Error&) {
        return std::nullopt;
    }
}

std::vector<std::string> split_ws(std::string_view line) {
    std::vector<std::string> out;
    std::istringstream in{std::string(line)};
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

bool is_key_type(const std::string& s) {
    return s.rfind("ssh-", 0) == 0 || s.rfind("ecdsa-", 0) == 0 || s.rfind("sk-", 0) == 0 ||
           s.rfind("rsa-", 0) == 0;
}

// Does one known_hosts host pattern name this host? Plain names, "[host]:port", hashed "|1|".
bool host_matches(const std::string& pattern, const std::string& host, std::uint16_t port) {
    std::string want = port == 22 ? host : "[" + host + "]:" + std::to_string(port);
    if (pattern.rfind("|1|", 0) == 0) {
        auto bar = pattern.find('|', 3);
        if (bar == std::string::npos) return false;
        auto salt = decode_base64(std::string_view(pattern).substr(3, bar - 3));
        auto hash = decode_base64(std::string_view(pattern).substr(bar + 1));
        if (!salt || !hash) return false;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        HMAC(EVP_sha1(), salt->data(), static_cast<int>(salt->size()),
             reinterpret_cast<const unsigned char*>(want.data()), want.size(), md, &len);
        return len == hash->size() && std::memcmp(md, hash->data(), len) == 0;
    }
    std::istringstream in(pattern);
    std::string p;
    while (std::getline(in, p, ',')) {
        if (p == want) return true;
    }
    return false;
}

}  // namespace

ParsedKey parse_public_key_line(std::string_view line) {
    auto words = split_ws(line);
    // "type base64 [comment]" or "hosts type base64 [comment]" (known_hosts), maybe "@marker".
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (!is_key_type(words[i])) continue;
        auto blob = decode_base64(words[i + 1]);
        if (!blob || blob->size() < 8) break;
        return ParsedKey{words[i], fingerprint_of_blob(*blob)};
    }
    throw SshError("not an OpenSSH public key line: \"" + std::string(line.substr(0, 40)) +
                   "...\"");
}

std::string fingerprint_of_public_key(std::string_view line) {
    return parse_public_key_line(line).fingerprint;
}

std::vector<ParsedKey> known_hosts_entries(const std::filesystem::path& file,
                                           const std::string& host, std::uint16_t port) {
    std::ifstream in(file);
    if (!in) throw SshError("cannot read known_hosts file " + file.string());
    std::vector<ParsedKey> keys;
    std::vector<std::string> revoked;  // fingerprints
    std::string line;
    for (int n = 0; n < 1000000 && std::getline(in, line); ++n) {
        auto words = split_ws(line);
        if (words.size() < 3 || words[0][0] == '#') continue;
        if (words[0] == "@revoked") {
            // A revoked key is refused for every host, whatever the line's host pattern
            // ("@revoked * key" is the usual form; sky does not expand patterns): stricter than
            // OpenSSH never weaker, and it wins over any line that accepts the key.
            try {
                revoked.push_back(parse_public_key_line(line).fingerprint);
            } catch (const SshError&) {
            }
            continue;
        }
        if (words[0][0] == '@') continue;  // @cert-authority: not a pin
        if (!host_matches(words[0], host, port)) continue;
        try {
            keys.push_back(parse_public_key_line(line));
        } catch (const SshError&) {
        }
    }
    std::erase_if(keys, [&](const ParsedKey& k) {
        return std::find(revoked.begin(), revoked.end(), k.fingerprint) != revoked.end();
    });
    return keys;
}

std::vector<std::string> known_hosts_revoked(const std::filesystem::path& file) {
    std::ifstream in(file);
    if (!in) throw SshError("cannot read known_hosts file " + file.string());
    std::vector<std::string> revoked;
    std::string line;
    for (int n = 0; n < 1000000 && std::getline(in, line); ++n) {
        auto words = split_ws(line);
        if (words.size() < 3 || words[0] != "@revoked") continue;
        try {
            revoked.push_back(parse_public_key_line(line).fingerprint);
        } catch (const SshError&) {
        }
    }
    return revoked;
}

HostKeyPin HostKeyPin::fingerprint(std::string fp) {
    HostKeyPin pin;
    pin.fingerprints.push_back(std::move(fp));
    return pin;
}

HostKeyPin HostKeyPin::public_key(std::string_view line) {
    return fingerprint(fingerprint_of_public_key(line));
}

HostKeyPin HostKeyPin::known_hosts(std::filesystem::path file) {
    HostKeyPin pin;
    pin.known_hosts_file = std::move(file);
    return pin;
}

HostKeyPin HostKeyPin::insecure_accept_any() {
    HostKeyPin pin;
    pin.accept_any = true;
    return pin;
}

HostKeyMismatch::HostKeyMismatch(std::string host, std::vector<std::string> expected,
                                 std::string actual, bool revoked)
    : SshError(revoked ? "ssh host key " + actual + " of " + host +
                             " is marked @revoked in known_hosts; refusing to connect"
                       : "ssh host key mismatch for " + host + ": expected " +
                             (expected.empty()
                                  ? std::string("a key from known_hosts (none listed for it)")
                                  : join(expected)) +
                             ", server presented " + actual + "; refusing to connect"),
      host_(std::move(host)),
      expected_(std::move(expected)),
      actual_(std::move(actual)) {}

}  // namespace sky::detail::ssh
