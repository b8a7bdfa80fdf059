#pragma once
// A worker's crash report: what its signal handler (worker/crash_handler.cpp) writes to the
// crash file when a call kills it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), and how the client
// reads it back and symbolizes the frames from its own copy of the program.
//
// The file is text, one record per line, written with nothing but write(2):
//   sky-crash 1
//   signal <signo> <si_code> <fault address, hex>
//   call <id of the call the crashing thread ran; 0: none>
//   running <id> ...                      (every call running in the process)
//   module <index> <main|lib> <build id, hex, or -> <path>
//   frame <module index, or -> <offset in the module, or the address when no module, hex>
//   output <n>                            (then n bytes: output not yet sent, then a newline)
//   end
// Frames are innermost first. A frame's offset is relative to its module's load address, so
// the client adds its own load address of the same module (matched by build id) despite ASLR.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/errors.hpp"

namespace sky::detail {

inline constexpr std::string_view crash_report_magic = "sky-crash 1";
/// What a crash report holds at most, as the worker's handler writes it; the client reads no
/// more of a report than this (a hostile worker's report is not amplified into every lost
/// call): frames of the stack, ids of the calls that ran, loaded modules.
inline constexpr std::size_t crash_report_max_frames = 64;
inline constexpr std::size_t crash_report_max_running = 256;
inline constexpr std::size_t crash_report_max_modules = 4096;

struct CrashReport {
    struct Module {
        bool main = false;  ///< the executable (its path on the worker's machine differs)
        std::string build_id;
        std::string path;
    };
    struct Frame {
        int module = -1;  ///< index into modules; -1: in no known module
        std::uintptr_t offset = 0;
    };
    int signal = 0;
    int code = 0;
    std::uintptr_t fault_address = 0;
    std::uint64_t call_id = 0;
    std::vector<std::uint64_t> running;
    std::vector<Module> modules;
    std::vector<Frame> frames;
    std::string output;
};

/// Reads a crash file's text; nullopt when it holds no report (empty, or not one). A report cut
/// short (the handler did not finish) gives what it has.
std::optional<CrashReport> parse_crash_report(std::string_view text);

/// The report's frames as this process sees them: each mapped into this process's copy of its
/// module (same build id; the executable also by being the executable), then named with
/// Boost.Stacktrace (function; file and line where there is debug information). A frame of a
/// module this process has not loaded is named "<file name>+0x<offset>", address the offset.
std::vector<StackFrame> symbolize(const CrashReport& report);

/// What the pool learns from a crash report (NodeExit::crash).
struct WorkerCrash {
    int signal = 0;
    std::uint64_t call_id = 0;           ///< the call the crashing thread ran; 0: none
    std::vector<std::uint64_t> running;  ///< every call the worker was running
    std::vector<StackFrame> stack;       ///< innermost first
    std::vector<std::string> output;     ///< lines written but not yet sent
};

/// parse_crash_report and symbolize in one; nullopt when `text` holds no report.
std::optional<WorkerCrash> read_crash_report(std::string_view text);
/// The same from the crash file at `path` (read up to 1 MiB); nullopt when there is none.
std::optional<WorkerCrash> read_crash_file(const std::string& path);

}  // namespace sky::detail
