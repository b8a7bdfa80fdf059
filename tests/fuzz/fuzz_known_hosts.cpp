// known_hosts files and public key lines: parse_public_key_line on every line (a key or an
// SshError), and the whole input as a known_hosts file for a few hosts (known_hosts_entries and
// known_hosts_revoked never throw for its content). A key the file revokes is never accepted.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "ssh/host_key.hpp"

using namespace sky::detail::ssh;

namespace {
// One file per process, rewritten for every input; removed at exit.
// The name lives in a plain array: the exit handler runs after `p` below is destroyed (it was
// registered before `p` finished construction), so it must not read `p`.
char scratch_name[] = "/tmp/sky-fuzz-known-hosts-XXXXXX";
const std::filesystem::path& scratch() {
    static const std::filesystem::path p = [] {
        const int fd = ::mkstemp(scratch_name);
        if (fd < 0) sky::fuzz::finding("cannot create a temporary file");
        ::close(fd);
        std::atexit([] { ::unlink(scratch_name); });
        return std::filesystem::path(scratch_name);
    }();
    return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = sky::fuzz::text(data, size);
    for (std::size_t at = 0, lines = 0; at <= text.size() && lines < 256; ++lines) {
        const std::size_t nl = std::min(text.find('\n', at), text.size());
        const std::string_view line = text.substr(at, nl - at);
        sky::fuzz::expect_typed([&] {
            const ParsedKey k = parse_public_key_line(line);
            sky::fuzz::check(!k.type.empty() && k.fingerprint.starts_with("SHA256:"),
                             "a parsed key without type or SHA256 fingerprint");
        });
        at = nl + 1;
    }
    {
        std::ofstream out(scratch(), std::ios::binary | std::ios::trunc);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
    }
    std::vector<std::string> revoked;
    sky::fuzz::expect_typed([&] { revoked = known_hosts_revoked(scratch()); });
    // The first word of the input may be a host the file names; the others are fixed.
    std::string first(text.substr(0, std::min(text.find_first_of(" \t\n,"), text.size())));
    if (first.size() > 2 && first.front() == '[') first = first.substr(1, first.find(']') - 1);
    for (const auto& target : {std::pair<std::string, std::uint16_t>{first, 22},
                               {first, 2222},
                               {"10.0.0.2", 22},
                               {"example.com", 2200}}) {
        sky::fuzz::expect_typed([&] {
            for (const ParsedKey& k : known_hosts_entries(scratch(), target.first, target.second))
                sky::fuzz::check(
                    std::find(revoked.begin(), revoked.end(), k.fingerprint) == revoked.end(),
                    "a key marked @revoked was accepted");
        });
    }
    return 0;
}
