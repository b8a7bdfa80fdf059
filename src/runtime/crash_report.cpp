#include "runtime/crash_report.hpp"

// Boost.Stacktrace, header-only, with libbacktrace (which reads DWARF and the symbol table). One
// backtrace state for the process, used under a lock: the per-thread default would keep one
// parsed copy of the debug information for every thread that ever symbolized.
#define BOOST_STACKTRACE_USE_BACKTRACE
#define BOOST_STACKTRACE_BACKTRACE_FORCE_STATIC
#include <fmt/format.h>
#include <link.h>

#include <boost/stacktrace/frame.hpp>
#include <charconv>
#include <cstring>
#include <fstream>
#include <mutex>

#include "runtime/build_id.hpp"
#include "util/file.hpp"

namespace sky::detail {

namespace {

std::string_view next_line(std::string_view& text) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    return line;
}

std::string_view next_word(std::string_view& line) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const auto sp = line.find(' ');
    std::string_view w = line.substr(0, sp);
    line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
    return w;
}

template <class T>
bool number(std::string_view w, T& out, int base = 10) {
    if (base == 16 && w.rfind("0x", 0) == 0) w.remove_prefix(2);
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), out, base);
    return !w.empty() && ec == std::errc() && end == w.data() + w.size();
}

struct Loaded {
    bool main = false;
    std::string name;
    std::string build_id;
    std::uintptr_t base = 0;
};

std::vector<Loaded> loaded_modules() {
    std::vector<Loaded> out;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* p) {
            Loaded l;
            l.main = !info->dlpi_name || !info->dlpi_name[0];
            l.name = info->dlpi_name ? info->dlpi_name : "";
            l.build_id = build_id_hex(*info);
            l.base = info->dlpi_addr;
            static_cast<std::vector<Loaded>*>(p)->push_back(std::move(l));
            return 0;
        },
        &out);
    return out;
}

std::string_view file_name(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// This process's copy of the worker's module `m`: the same build id; without build ids, the
// executable for the executable and a library of the same file name for a library.
const Loaded* match(const CrashReport::Module& m, const std::vector<Loaded>& loaded) {
    for (auto& l : loaded)
        if (!m.build_id.empty() && l.build_id == m.build_id) return &l;
    if (!m.build_id.empty()) {
        // A build id that no module here has: a module of another build, whose symbols
        // would be wrong.
        for (auto& l : loaded)
            if (!l.build_id.empty() && l.main == m.main &&
                (m.main || file_name(l.name) == file_name(m.path)))
                return nullptr;
    }
    for (auto& l : loaded)
        if (l.main == m.main && (m.main || file_name(l.name) == file_name(m.path))) return &l;
    return nullptr;
}

}  // namespace

std::optional<CrashReport> parse_crash_report(std::string_view text) {
    if (next_line(text) != crash_report_magic) return std::nullopt;
    CrashReport r;
    while (!text.empty()) {
        std::string_view line = next_line(text);
        const std::string_view key = next_word(line);
        if (key == "signal") {
            number(next_word(line), r.signal);
            number(next_word(line), r.code);
            number(next_word(line), r.fault_address, 16);
        } else if (key == "call") {
            number(next_word(line), r.call_id);
        } else if (key == "running") {
            for (std::uint64_t id; !line.empty() && r.running.size() < crash_report_max_running;)
                if (number(next_word(line), id)) r.running.push_back(id);
        } else if (key == "module") {
            CrashReport::Module m;
            std::size_t index = 0;
            if (!number(next_word(line), index) || index != r.modules.size() ||
                index >= crash_report_max_modules)
                continue;
            m.main = next_word(line) == "main";
            m.build_id = next_word(line);
            if (m.build_id == "-") m.build_id.clear();
            m.path = line;
            r.modules.push_back(std::move(m));
        } else if (key == "frame") {
            if (r.frames.size() >= crash_report_max_frames) continue;
            CrashReport::Frame f;
            const std::string_view mod = next_word(line);
            if (mod != "-" && !number(mod, f.module)) continue;
            if (!number(next_word(line), f.offset, 16)) continue;
            if (f.module >= static_cast<int>(r.modules.size())) f.module = -1;
            r.frames.push_back(f);
        } else if (key == "output") {
            std::size_t n = 0;
            if (!number(next_word(line), n)) break;
            n = std::min(n, text.size());
            r.output.append(text.substr(0, n));
            text.remove_prefix(n);
            if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
        } else if (key == "end") {
            break;
        }
    }
    if (r.signal <= 0) return std::nullopt;
    return r;
}

std::vector<StackFrame> symbolize(const CrashReport& report) {
    static std::mutex m;  // the one backtrace state is not for concurrent use
    std::lock_guard lk(m);
    const std::vector<Loaded> loaded = loaded_modules();
    std::vector<StackFrame> out;
    for (std::size_t i = 0; i < report.frames.size(); ++i) {
        const auto& f = report.frames[i];
        StackFrame s;
        const CrashReport::Module* mod =
            f.module >= 0 ? &report.modules[static_cast<std::size_t>(f.module)] : nullptr;
        const Loaded* here = mod ? match(*mod, loaded) : nullptr;
        if (!here) {
            s.address = f.offset;
            if (mod) s.function = fmt::format("{}+0x{:x}", file_name(mod->path), f.offset);
            out.push_back(std::move(s));
            continue;
        }
        s.address = here->base + f.offset;
        // Every frame but the innermost holds a return address: the call is the instruction
        // before it (which may be on another line, or the last one of another function).
        const std::uintptr_t lookup = i == 0 ? s.address : s.address - 1;
        boost::stacktrace::frame bf(
            reinterpret_cast<boost::stacktrace::frame::native_frame_ptr_t>(lookup));
        s.function = bf.name();
        s.file = bf.source_file();
        s.line = static_cast<int>(bf.source_line());
        if (s.line == 0) s.file.clear();
        if (s.function.empty())
            s.function = fmt::format("{}+0x{:x}", file_name(mod->path), f.offset);
        out.push_back(std::move(s));
    }
    return out;
}

std::optional<WorkerCrash> read_crash_report(std::string_view text) {
    auto r = parse_crash_report(text);
    if (!r) return std::nullopt;
    WorkerCrash c;
    c.signal = r->signal;
    c.call_id = r->call_id;
    c.running = r->running;
    c.stack = symbolize(*r);
    std::string_view out = r->output;
    while (!out.empty()) {
        std::string_view line = next_line(out);
        c.output.emplace_back(line);
    }
    return c;
}

std::optional<WorkerCrash> read_crash_file(const std::string& path) {
    if (path.empty()) return std::nullopt;
    return read_crash_report(read_file(path, 1u << 20).value_or(""));
}

}  // namespace sky::detail
