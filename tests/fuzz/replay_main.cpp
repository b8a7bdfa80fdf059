// The main of a fuzz target in normal builds: feeds every file named on the command line (or
// found in a directory named there) to LLVMFuzzerTestOneInput once, so the corpus and every
// crash found become regression cases. A finding aborts, which fails the test. As libFuzzer's
// -malloc_limit_mb=256 does, one allocation larger than 256 MiB is a finding (an allocation bomb:
// a size field believed before its bytes arrived); glibc's malloc is wrapped here to see it (under
// ASan, which owns malloc, its max_allocation_size_mb does the same).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

#if defined(__SANITIZE_ADDRESS__)
#define SKY_REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKY_REPLAY_ASAN 1
#endif
#endif

#ifdef SKY_REPLAY_ASAN
// Built with ASan (the asan preset): ASan owns malloc, so the wrappers below would fight it.
// Its own limit makes the same allocation a finding (a report, then a non-zero exit); options
// from ASAN_OPTIONS come on top of these.
extern "C" const char* __asan_default_options() { return "max_allocation_size_mb=256"; }
#else
// glibc's own entry points, which the wrappers below forward to.
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);

namespace {
constexpr std::size_t malloc_limit = std::size_t{256} << 20;
void over_limit(std::size_t n) {
    std::fprintf(stderr, "FUZZ FINDING: one allocation of %zu bytes (limit %zu)\n", n,
                 malloc_limit);
    std::abort();
}
}  // namespace

extern "C" void* malloc(std::size_t n) noexcept {
    if (n > malloc_limit) over_limit(n);
    return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t count, std::size_t n) noexcept {
    if (n && count > malloc_limit / n) over_limit(count * n);
    return __libc_calloc(count, n);
}
extern "C" void* realloc(void* p, std::size_t n) noexcept {
    if (n > malloc_limit) over_limit(n);
    return __libc_realloc(p, n);
}
#endif

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path p = argv[i];
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            for (const auto& e : fs::directory_iterator(p))
                if (e.is_regular_file()) inputs.push_back(e.path());
        } else if (fs::is_regular_file(p, ec)) {
            inputs.push_back(p);
        }
    }
    std::sort(inputs.begin(), inputs.end());
    if (inputs.empty()) {
        std::printf("skipped: no inputs in the corpus\n");
        return 0;
    }
    for (const auto& p : inputs) {
        std::ifstream in(p, std::ios::binary);
        const std::string bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
        std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), bytes.size());
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("%zu inputs replayed\n", inputs.size());
    return 0;
}
