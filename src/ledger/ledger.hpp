#pragma once
// The write-ahead ledger: one file per pool under ~/.sky/pools/ (SKY_HOME/pools when SKY_HOME
// is set; directory 0700, files 0600), written before any launch, each instance id appended (and
// flushed to disk) as soon as the provider names it, and closed at teardown. `sky ls` reads it
// for live pools; `sky gc` uses it to tell a dead pool's machines (owner process gone, or ledger
// closed with machines left) from a live pool's, which it never touches.
//
// The file is JSON lines, appended with O_APPEND and fsync'ed per record, so a crash loses at
// most the record being written: a torn last line is ignored when the file is read.
//   {"sky_ledger":1,"type":"pool","pool":"..","provider":"..","region":"..","pid":N,
//    "pid_start":"<boot id>:<start ticks>","pid_ns":"pid:[N]","host":"..","machine_id":"..",
//    "lock":true,"started":<unix s>}
// The pool holds its file locked (flock) for its whole life: the lock, not the pid, says whether
// it still runs (the kernel drops it when the process dies, in any PID namespace).
//   {"type":"region","region":".."}          (when open() did not know it)
//   {"type":"instance","id":".."}
//   {"type":"gone","id":".."}
//   {"type":"infra","left":[".."]}           (what teardown could not delete; [] once deleted)
//   {"type":"budget","max_total_usd":X,"max_hourly_usd":Y}   (the pool's limits, 0: none)
//   {"type":"cost","spent_usd":X,"at":<unix s>}  (spend so far; at most one per 10 s, and at
//                                                  teardown; the last counts)
//   {"type":"closed","at":<unix s>,"by":"owner"|"gc"}
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail {

/// A process's identity on this machine: "<boot id>:<start time in clock ticks>" from
/// /proc/PID/stat, so that a pid reused by another process (or after a reboot) does not match.
/// Empty when the process does not exist or is a zombie (it has ended).
[[nodiscard]] std::string process_identity(long pid);

/// This machine's host name ("" when unknown).
[[nodiscard]] std::string this_host();
/// /etc/machine-id ("" when unknown).
[[nodiscard]] std::string this_machine_id();
/// This process's PID namespace ("pid:[4026531836]"; "" when unknown).
[[nodiscard]] std::string this_pid_namespace();
/// Whether a process holds this ledger file's lock: its pool still runs.
[[nodiscard]] bool ledger_locked(const std::filesystem::path& file);

/// One pool as its ledger file records it.
struct LedgerRecord {
    /// Whether the pool's client still runs.
    enum class Owner {
        alive,       ///< the ledger's lock is held (or the recorded process runs)
        dead,        ///< the lock is free and the recorded process has ended
        other_host,  ///< written on another machine (a shared home): cannot be told from here
        unknown,     ///< no lock recorded and the pid cannot tell (another PID namespace)
    };
    std::string pool_id;
    std::string provider;       ///< Provider::name()
    std::string region;         ///< may be empty
    long owner_pid = 0;         ///< the client process
    std::string owner_start;    ///< process_identity(owner_pid) when the pool started
    std::string host;           ///< the client's host name
    std::string machine_id;     ///< the client's /etc/machine-id
    std::string pid_namespace;  ///< the client's PID namespace (the pid means something there)
    bool locked = false;        ///< the client holds the file locked while it runs
    std::int64_t started_unix = 0;
    std::vector<std::string> instances;       ///< every id ever recorded, in order
    std::vector<std::string> gone_instances;  ///< confirmed gone
    /// The pool's infrastructure (key pair, firewall) that teardown could not delete, as its
    /// last "infra" record says; empty when all of it is gone.
    std::vector<std::string> infra_left;
    /// What the pool had spent (USD) at its last cost record; empty when it wrote none.
    std::optional<double> spent_usd;
    double limit_usd = 0;         ///< budget.max_total_usd (0: none)
    double hourly_limit_usd = 0;  ///< budget.max_hourly_usd (0: none)
    bool closed = false;          ///< teardown finished (or gc collected it)
    std::int64_t closed_unix = 0;
    std::string closed_by;  ///< "owner" or "gc"
    int damaged_lines = 0;  ///< records after the first that could not be read (skipped)
    std::filesystem::path file;

    /// Whether the owning process still runs, is gone, or cannot be checked from here.
    [[nodiscard]] Owner owner() const;
    /// Whether the pool may still run: anything but a proven dead owner (another host, another
    /// namespace without a lock) counts as alive: nothing here may touch it.
    [[nodiscard]] bool owner_alive() const { return owner() != Owner::dead; }
    /// Instances recorded and not confirmed gone, in recording order.
    [[nodiscard]] std::vector<std::string> live_instances() const;
    /// Not running any more: closed, or its owner is gone (what `sky gc` may collect).
    [[nodiscard]] bool finished() const { return closed || owner() == Owner::dead; }
    /// Whether machines or infrastructure of this pool may still exist.
    [[nodiscard]] bool leaves_something() const {
        return !live_instances().empty() || !infra_left.empty();
    }
};

class Ledger {
public:
    /// ~/.sky/pools (SKY_HOME/pools when SKY_HOME is set). Throws sky::Error when neither
    /// SKY_HOME nor a home directory is known.
    static std::filesystem::path directory();
    /// Creates this pool's ledger file (0600, in directory() made 0700) and writes its record,
    /// flushed to disk. Throws sky::Error naming the path when it cannot be written.
    static std::unique_ptr<Ledger> open(const std::string& pool_id, std::string_view provider,
                                        std::string_view region);
    /// Appends to an existing pool's ledger (`sky gc` records what it collected). Throws
    /// sky::Error when the file cannot be opened.
    static std::unique_ptr<Ledger> attach(const std::filesystem::path& file);
    /// What `sky gc` established of a pool: these machines are gone, this much of its
    /// infrastructure is left (recorded when the ledger said some was, or some is); then the
    /// ledger is closed by gc. Throws sky::Error when the file cannot be opened.
    static void record_collected(const LedgerRecord& record, const std::vector<std::string>& gone,
                                 const std::vector<std::string>& infra_left = {});
    /// Every ledger in directory(), oldest first. Unreadable or malformed files are skipped,
    /// never fatal; each one's path and reason is appended to `skipped` when given.
    static std::vector<LedgerRecord> read_all(std::vector<std::string>* skipped = nullptr);
    /// Parses one ledger file. A torn last line is ignored and a damaged later record skipped
    /// (counted); throws sky::Error when the file cannot be read or its first line is not a
    /// pool record.
    static LedgerRecord read(const std::filesystem::path& file);

    ~Ledger();
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    /// Records an instance id (appended and flushed before returning). Thread-safe; never
    /// throws (a failure to write is logged once).
    void instance(const std::string& id) noexcept;
    /// Records the region the pool runs in, once the provider knows it (when open() could not
    /// say): `sky gc` then asks the cloud in that region. Thread-safe; never throws.
    void region(std::string_view region) noexcept;
    /// Records that an instance is confirmed gone. Thread-safe; never throws.
    void instance_gone(const std::string& id) noexcept;
    /// Records what of the pool's infrastructure is still there after an attempt to delete it
    /// (empty: all of it is gone). The last such record counts. Thread-safe; never throws.
    void infra_left(const std::vector<std::string>& what) noexcept;
    /// Records the pool's spending limits (PoolSpec::budget; 0: none). Thread-safe; never
    /// throws.
    void budget(double max_total_usd, double max_hourly_usd) noexcept;
    /// Records what the pool has spent so far (USD): the pool writes it at a bounded rate and
    /// once more at teardown, and `sky ls` shows the last. Thread-safe; never throws.
    void spent(double usd) noexcept;
    /// Records that teardown finished. Thread-safe; never throws.
    void close() noexcept;
    /// close() on behalf of `sky gc` (the record says who closed it).
    void close_collected() noexcept;
    [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }

private:
    Ledger(std::filesystem::path file, int fd);
    void append(const std::string& line) noexcept;
    std::filesystem::path file_;
    int fd_ = -1;
    std::mutex m_;
    bool torn_ = false;  ///< a write failed part way: the next record starts on a new line
    bool warned_ = false;
};

}  // namespace sky::detail
