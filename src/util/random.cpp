#include "util/random.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "sky/errors.hpp"

namespace sky::detail {

void random_bytes(std::span<std::byte> out) {
    // RAND_bytes takes an int: fill in chunks (callers ask for a few bytes, but be exact).
    std::size_t done = 0;
    while (done < out.size()) {
        const int n = static_cast<int>(std::min<std::size_t>(out.size() - done, INT_MAX / 2));
        if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data() + done), n) != 1)
            throw Error(
                "the system's random number generator failed (OpenSSL RAND_bytes); refusing to "
                "make a secret from anything weaker");
        done += static_cast<std::size_t>(n);
    }
}

std::string random_hex(std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::vector<std::byte> raw((n + 1) / 2);
    random_bytes(raw);
    std::string s(n, '0');
    for (std::size_t i = 0; i < n; ++i) {
        auto b = static_cast<unsigned>(raw[i / 2]);
        s[i] = digits[(i % 2 ? b : b >> 4) & 15];
    }
    OPENSSL_cleanse(raw.data(), raw.size());
    return s;
}

}  // namespace sky::detail
