#include "runtime/worker/crash_handler.hpp"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <boost/stacktrace/safe_dump_to.hpp>
#include <cerrno>
#include <cstring>

#include "runtime/build_id.hpp"
#include "runtime/crash_report.hpp"

namespace sky::detail {

namespace {

constexpr int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t alt_stack_size = 256u << 10;
constexpr std::size_t max_frames = crash_report_max_frames;
constexpr int max_slots = static_cast<int>(crash_report_max_running);

std::atomic<int> g_fd{-1};
std::atomic<int> g_out_fds[2] = {-1, -1};
std::atomic<bool> g_handling{false};
struct sigaction g_previous[sizeof crash_signals / sizeof crash_signals[0]];
// The call each executor thread runs (0: none), for the "running" line: atomics, which the
// handler may read.
std::atomic<std::uint64_t> g_calls[max_slots];
std::atomic<int> g_next_slot{0};

// Initial-exec: reading it in the handler never allocates.
thread_local int t_slot __attribute__((tls_model("initial-exec"))) = -1;

// ---- Output without allocation or locks: a fixed buffer and write(2). ----
struct Out {
    int fd;
    char buf[4096];
    std::size_t n = 0;

    void flush() noexcept {
        std::size_t at = 0;
        while (at < n) {
            ssize_t w = ::write(fd, buf + at, n - at);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            at += static_cast<std::size_t>(w);
        }
        n = 0;
    }
    void put(const char* s, std::size_t len) noexcept {
        while (len) {
            if (n == sizeof buf) flush();
            std::size_t k = std::min(len, sizeof buf - n);
            std::memcpy(buf + n, s, k);
            n += k;
            s += k;
            len -= k;
        }
    }
    void put(const char* s) noexcept { put(s, std::strlen(s)); }
    void dec(std::uint64_t v) noexcept {
        char d[24];
        int i = 0;
        do {
            d[i++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v);
        while (i) put(&d[--i], 1);
    }
    void hex(std::uint64_t v) noexcept {
        static constexpr char digits[] = "0123456789abcdef";
        char d[16];
        int i = 0;
        do {
            d[i++] = digits[v & 15];
            v >>= 4;
        } while (v);
        put("0x", 2);
        while (i) put(&d[--i], 1);
    }
};

std::uintptr_t context_pc(void* uc) noexcept {
    auto* u = static_cast<ucontext_t*>(uc);
#if defined(__x86_64__)
    return static_cast<std::uintptr_t>(u->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
    return static_cast<std::uintptr_t>(u->uc_mcontext.pc);
#else
    (void)u;
    return 0;
#endif
}

std::uintptr_t context_return_address(void* uc) noexcept {
    auto* u = static_cast<ucontext_t*>(uc);
#if defined(__x86_64__)
    // After a call through a null pointer the return address is on top of the stack.
    return *reinterpret_cast<const std::uintptr_t*>(u->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
    return static_cast<std::uintptr_t>(u->uc_mcontext.regs[30]);
#else
    (void)u;
    return 0;
#endif
}

struct Frames {
    std::uintptr_t pc[max_frames];
    int module[max_frames];
    std::size_t n = 0;
};

struct ModuleWalk {
    Frames* frames;
    Out* out;
    int next = 0;
};

// For each loaded module that holds a frame: a "module" line, and that frame's module index.
int module_of_frames(dl_phdr_info* info, std::size_t, void* p) {
    auto& w = *static_cast<ModuleWalk*>(p);
    bool any = false;
    for (std::size_t f = 0; f < w.frames->n; ++f) {
        if (w.frames->module[f] >= 0) continue;
        const std::uintptr_t pc = w.frames->pc[f];
        for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            const std::uintptr_t from = info->dlpi_addr + ph.p_vaddr;
            if (pc >= from && pc < from + ph.p_memsz) {
                w.frames->module[f] = w.next;
                any = true;
                break;
            }
        }
    }
    if (!any) return 0;
    Out& o = *w.out;
    const bool main = !info->dlpi_name || !info->dlpi_name[0];
    o.put("module ");
    o.dec(static_cast<std::uint64_t>(w.next));
    o.put(main ? " main " : " lib ");
    unsigned char id[64];
    const std::size_t n = build_id_bytes(*info, id, sizeof id);
    static constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < n; ++i) {
        const char d[2] = {digits[id[i] >> 4], digits[id[i] & 15]};
        o.put(d, 2);
    }
    if (n == 0) o.put("-");
    o.put(" ");
    if (main) {
        char path[1024];
        ssize_t len = ::readlink("/proc/self/exe", path, sizeof path);
        if (len > 0) o.put(path, static_cast<std::size_t>(len));
    } else {
        o.put(info->dlpi_name);
    }
    o.put("\n");
    // For each frame, the address relative to this module's load address.
    for (std::size_t f = 0; f < w.frames->n; ++f)
        if (w.frames->module[f] == w.next) w.frames->pc[f] -= info->dlpi_addr;
    ++w.next;
    return 0;
}

void drain_output(Out& o) noexcept {
    static char data[32u << 10];
    std::size_t n = 0;
    for (auto& a : g_out_fds) {
        const int fd = a.load();
        if (fd < 0) continue;
        while (n < sizeof data) {
            ssize_t r = ::read(fd, data + n, sizeof data - n);  // the pipes are non-blocking
            if (r <= 0) break;
            n += static_cast<std::size_t>(r);
        }
    }
    if (n == 0) return;
    o.put("output ");
    o.dec(n);
    o.put("\n");
    o.put(data, n);
    o.put("\n");
}

void on_crash(int sig, siginfo_t* info, void* uc) {
    const int saved_errno = errno;
    // One report: a second thread that crashes meanwhile waits for the process to end.
    if (g_handling.exchange(true)) {
        for (;;) ::pause();
    }
    // An unwinder that hangs (a corrupt stack) must not keep a dead worker alive.
    ::alarm(10);
    const int fd = g_fd.load();
    if (fd >= 0) {
        Out o{fd};
        o.put(crash_report_magic.data(), crash_report_magic.size());
        o.put("\nsignal ");
        o.dec(static_cast<std::uint64_t>(sig));
        o.put(" ");
        o.dec(static_cast<std::uint64_t>(static_cast<std::uint32_t>(info ? info->si_code : 0)));
        o.put(" ");
        o.hex(reinterpret_cast<std::uintptr_t>(info ? info->si_addr : nullptr));
        o.put("\ncall ");
        o.dec(t_slot >= 0 ? g_calls[t_slot].load() : 0);
        o.put("\nrunning");
        const int slots = std::min(g_next_slot.load(), max_slots);
        for (int i = 0; i < slots; ++i)
            if (const auto id = g_calls[i].load()) {
                o.put(" ");
                o.dec(id);
            }
        o.put("\n");
        o.flush();  // what is known so far is on disk before the unwinder runs

        static Frames frames;
        const std::uintptr_t pc = context_pc(uc);
        const void* raw[max_frames + 1];
        std::size_t n = boost::stacktrace::safe_dump_to(0, raw, sizeof raw);
        // The frames above the one that was interrupted are the handler's own.
        std::size_t first = n;
        for (std::size_t i = 0; i < n; ++i)
            if (reinterpret_cast<std::uintptr_t>(raw[i]) == pc) {
                first = i;
                break;
            }
        if (first < n) {
            // The unwinder ends the list with a null frame.
            for (std::size_t i = first; i < n && raw[i] && frames.n < max_frames; ++i)
                frames.pc[frames.n++] = reinterpret_cast<std::uintptr_t>(raw[i]);
        } else {
            // The unwinder could not pass the signal frame (a jump to address 0, say): the
            // interrupted instruction, and the caller when the jump came from a call.
            frames.pc[frames.n++] = pc;
            if (pc == 0) frames.pc[frames.n++] = context_return_address(uc);
        }
        for (std::size_t i = 0; i < frames.n; ++i) frames.module[i] = -1;
        ModuleWalk walk{&frames, &o};
        dl_iterate_phdr(module_of_frames, &walk);
        for (std::size_t i = 0; i < frames.n; ++i) {
            o.put("frame ");
            if (frames.module[i] >= 0)
                o.dec(static_cast<std::uint64_t>(frames.module[i]));
            else
                o.put("-");
            o.put(" ");
            o.hex(frames.pc[i]);
            o.put("\n");
        }
        drain_output(o);
        o.put("end\n");
        o.flush();
    }
    ::alarm(0);
    // The previous disposition (the default: the process ends by this signal) takes over.
    for (std::size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; ++i)
        if (crash_signals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
    // A fault repeats when the handler returns; a signal that was sent is sent again.
    if (!info || info->si_code <= 0 || sig == SIGABRT) ::raise(sig);
    errno = saved_errno;
}

}  // namespace

bool install_crash_handler(const std::string& path) {
    if (path.empty()) return true;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    g_fd.store(fd);
    // Whatever the unwinder sets up on its first use (its caches, a library it loads) happens
    // now, outside any signal handler.
    const void* warm[8];
    (void)boost::stacktrace::safe_dump_to(0, warm, sizeof warm);
    struct sigaction sa {};
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; ++i)
        ::sigaction(crash_signals[i], &sa, &g_previous[i]);
    return true;
}

void crash_output_fds(int out_fd, int err_fd) noexcept {
    g_out_fds[0].store(out_fd);
    g_out_fds[1].store(err_fd);
}

void crash_report_append(std::string_view text) noexcept {
    const int fd = g_fd.load();
    if (fd < 0) return;
    Out o{fd};
    o.put(text.data(), text.size());
    o.flush();
}

CrashScope::CrashScope() {
    stack_ =
        ::mmap(nullptr, alt_stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack_ == MAP_FAILED) {
        stack_ = nullptr;
    } else {
        stack_t ss{};
        ss.ss_sp = stack_;
        ss.ss_size = alt_stack_size;
        if (::sigaltstack(&ss, nullptr) != 0) {
            ::munmap(stack_, alt_stack_size);
            stack_ = nullptr;
        }
    }
    slot_ = g_next_slot.fetch_add(1);
    t_slot = slot_ < max_slots ? slot_ : -1;
}

CrashScope::~CrashScope() {
    set_call(0);
    t_slot = -1;
    if (stack_) {
        stack_t ss{};
        ss.ss_flags = SS_DISABLE;
        ::sigaltstack(&ss, nullptr);
        ::munmap(stack_, alt_stack_size);
    }
}

void CrashScope::set_call(std::uint64_t id) noexcept {
    if (t_slot >= 0) g_calls[t_slot].store(id);
}

}  // namespace sky::detail
