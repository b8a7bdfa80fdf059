#pragma once
// The worker's side of crash forensics (the format: runtime/crash_report.hpp). A call that kills
// its worker with SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT leaves a report in the crash file
// the launcher named: the signal, the calls running, the crashing thread's frames (as module
// and offset) and the output not yet sent. The handler runs on an alternate signal stack (a
// stack overflow is a SIGSEGV too) and uses only write(2)-level calls and the unwinder; then
// the signal's previous disposition runs, so the exit status still says signal 11.
#include <cstdint>
#include <string>
#include <string_view>

namespace sky::detail {

/// Opens (truncates) the crash file at `path` and installs the handlers. Empty path: nothing.
/// Returns false, with errno set, when the file cannot be opened.
bool install_crash_handler(const std::string& path);

/// Where the output capture's pipes can be read from (fds 1 and 2 lead into them): what a call
/// wrote just before it crashed and nobody forwarded yet goes into the report.
void crash_output_fds(int out_fd, int err_fd) noexcept;

/// Appends `text` to the crash file (not in a signal handler): a node's worker passes on the
/// report of a worker process of its own that crashed.
void crash_report_append(std::string_view text) noexcept;

/// While alive, the calling thread has an alternate signal stack and runs no call.
class CrashScope {
public:
    CrashScope();
    ~CrashScope();
    CrashScope(const CrashScope&) = delete;
    CrashScope& operator=(const CrashScope&) = delete;
    /// The call this thread runs from now on (0: none); read by the handler.
    static void set_call(std::uint64_t id) noexcept;

private:
    void* stack_ = nullptr;
    int slot_ = -1;
};

}  // namespace sky::detail
