// `sky gc` for Local pools whose client has ended: a worker process still running is killed only
// when it proves to be that pool's worker (its command line has the worker flag, its environment
// the pool's SKY_PARENT_POOL); a pid that now belongs to another process is left alone.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "ledger/ledger.hpp"
#include "providers/descriptor/descriptor.hpp"
#include "runtime/worker.hpp"
#include "runtime/worker_launch.hpp"
#include "util/file.hpp"

namespace sky::detail {

namespace {

using Clock = std::chrono::steady_clock;

// NUL-separated /proc lists (cmdline, environ).
std::vector<std::string> proc_list(long pid, const char* what) {
    const std::string raw = read_file("/proc/" + std::to_string(pid) + "/" + what).value_or("");
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i < raw.size(); ++i)
        if (raw[i] == '\0') {
            out.push_back(raw.substr(start, i - start));
            start = i + 1;
        }
    if (start < raw.size()) out.push_back(raw.substr(start));
    return out;
}

bool is_worker_of(long pid, const std::string& pool_id) {
    const auto argv = proc_list(pid, "cmdline");
    if (std::find(argv.begin(), argv.end(), worker_flag) == argv.end()) return false;
    const auto env = proc_list(pid, "environ");
    return std::find(env.begin(), env.end(), WorkerLaunch::parent_pool_entry(pool_id)) != env.end();
}

// "local-<pid>": the ledger's name of a Local worker process.
std::optional<long> local_pid(const std::string& id) {
    if (id.rfind("local-", 0) != 0) return std::nullopt;
    const std::string n = id.substr(6);
    if (n.empty() || n.size() > 10 || !std::all_of(n.begin(), n.end(), ::isdigit))
        return std::nullopt;
    return std::stol(n);
}

void collect_one(const GcPool& p, const GcOptions& o) {
    if (!p.record) return;  // Local machines are always in a ledger
    std::vector<long> killed;
    std::vector<std::string> gone;
    for (const auto& id : p.machines) {
        const auto pid = local_pid(id);
        if (!pid || process_identity(*pid).empty()) {
            gone.push_back(id);
            continue;
        }
        if (!is_worker_of(*pid, p.pool_id)) {
            o.say(fmt::format("{}: pid {} is no longer its worker: left alone", p.pool_id, *pid));
            gone.push_back(id);
            continue;
        }
        if (o.dry_run) {
            o.say(fmt::format("{}: would kill leftover worker pid {}", p.label, *pid));
            continue;
        }
        ::kill(static_cast<pid_t>(*pid), SIGKILL);
        killed.push_back(*pid);
        gone.push_back(id);
    }
    // SIGKILL is not refused; wait (bounded) until each has ended.
    const auto until = Clock::now() + std::chrono::seconds(10);
    for (long pid : killed)
        while (!process_identity(pid).empty() && Clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (long pid : killed)
        if (!process_identity(pid).empty())
            o.fail(fmt::format("{}: worker pid {} did not end after SIGKILL", p.pool_id, pid));
    if (o.dry_run) {
        o.say(fmt::format("{}: would close its ledger", p.label));
        return;
    }
    std::string pids;
    for (long pid : killed) pids += fmt::format("{}pid {}", pids.empty() ? "" : ", ", pid);
    o.say(killed.empty()
              ? fmt::format("{}: nothing left running; ledger closed", p.label)
              : fmt::format("{}: killed leftover worker(s) {}; ledger closed", p.label, pids));
    try {
        Ledger::record_collected(*p.record, gone);
    } catch (const std::exception& e) {
        o.fail(fmt::format("pool {}: cannot update its ledger: {}", p.pool_id, e.what()));
    }
}

}  // namespace

void collect_local_pools(std::vector<GcPool> pools, const GcOptions& options) {
    for (const auto& p : pools) collect_one(p, options);
}

}  // namespace sky::detail
