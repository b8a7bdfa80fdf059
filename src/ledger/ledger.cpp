#include "ledger/ledger.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "sky/errors.hpp"
#include "util/private_files.hpp"

namespace sky::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kFormat = 1;
// A ledger holds a pool record and a line or two per instance: anything this large is not one.
constexpr std::size_t kMaxFile = 16u << 20;

std::string errno_text(int e) { return std::strerror(e); }

std::int64_t now_unix() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string read_small_file(const char* path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

// Pool ids become file names: nothing that could leave the directory or hide a file.
bool safe_name(std::string_view id) {
    if (id.empty() || id.size() > 128 || id.front() == '.') return false;
    return std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
}

// Writes all of `data` (retrying short writes and EINTR); returns how much was written.
std::size_t write_all(int fd, std::string_view data, int* err) {
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return done;
        }
        done += static_cast<std::size_t>(n);
    }
    return done;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string this_host() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return {};
    return buf;
}

std::string process_identity(long pid) {
    if (pid <= 0) return {};
    const std::string stat = read_small_file(("/proc/" + std::to_string(pid) + "/stat").c_str());
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the fields after the
    // last ')' are fixed. State is field 3, start time field 22.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return {};
    std::istringstream rest(stat.substr(close + 1));
    std::vector<std::string> f;
    for (std::string w; rest >> w && f.size() < 20;) f.push_back(w);
    if (f.size() < 20) return {};
    if (f[0] == "Z" || f[0] == "X" || f[0] == "x") return {};  // ended, not yet reaped
    const std::string boot = read_small_file("/proc/sys/kernel/random/boot_id");
    return boot + ":" + f[19];
}

std::string this_machine_id() { return read_small_file("/etc/machine-id"); }

std::string this_pid_namespace() {
    std::error_code ec;
    const fs::path ns = fs::read_symlink("/proc/self/ns/pid", ec);
    return ec ? std::string() : ns.string();
}

bool ledger_locked(const fs::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    // A shared probe: it conflicts with the owner's exclusive lock only, never with another gc.
    const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);  // releases the probe's lock
    return held;
}

LedgerRecord::Owner LedgerRecord::owner() const {
    // The running pool holds its ledger locked; the kernel releases the lock when the process
    // dies, whatever its PID namespace or container. Held: alive, whatever the pid says.
    if (ledger_locked(file)) return Owner::alive;
    if (!host.empty() && host != this_host()) return Owner::other_host;
    if (!machine_id.empty() && machine_id != this_machine_id()) return Owner::other_host;
    // The pid means something only in the namespace it was recorded in.
    const bool same_namespace = pid_namespace.empty() || pid_namespace == this_pid_namespace();
    const bool pid_alive =
        same_namespace && !owner_start.empty() && process_identity(owner_pid) == owner_start;
    // The owner locked its ledger and the lock is free: it ended (the pid check only confirms).
    if (locked) return pid_alive ? Owner::alive : Owner::dead;
    // No lock (an older sky, a file system without flock): only the pid can tell, and only in
    // this namespace; an empty start time tells nothing.
    if (!same_namespace || owner_start.empty()) return Owner::unknown;
    return pid_alive ? Owner::alive : Owner::dead;
}

std::vector<std::string> LedgerRecord::live_instances() const {
    const std::set<std::string> gone(gone_instances.begin(), gone_instances.end());
    std::vector<std::string> live;
    std::set<std::string> seen;
    for (const auto& id : instances)
        if (!gone.count(id) && seen.insert(id).second) live.push_back(id);
    return live;
}

fs::path Ledger::directory() {
    if (const char* s = std::getenv("SKY_HOME"); s && *s) return fs::path(s) / "pools";
    if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".sky" / "pools";
    // No HOME (a service, a bare container): the password database's home directory.
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* out = nullptr;
    if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &out) == 0 && out && pw.pw_dir &&
        *pw.pw_dir)
        return fs::path(pw.pw_dir) / ".sky" / "pools";
    throw Error("cannot place the pool ledger: neither SKY_HOME nor HOME is set");
}

Ledger::Ledger(fs::path file, int fd) : file_(std::move(file)), fd_(fd) {}

Ledger::~Ledger() {
    if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<Ledger> Ledger::open(const std::string& pool_id, std::string_view provider,
                                     std::string_view region) {
    if (!safe_name(pool_id)) throw Error("pool ledger: invalid pool id '" + pool_id + "'");
    const fs::path dir = directory();
    ensure_private_dir(dir);
    const fs::path file = dir / (pool_id + ".jsonl");
    const int fd =
        ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        throw Error("cannot create pool ledger " + file.string() + ": " + errno_text(errno));
    // Held for the pool's life (the fd stays open until the Ledger is destroyed): `sky gc` takes
    // a held lock for a running pool. Taken before the record is written, so whoever can read
    // the record finds the lock held. A gc probing this instant holds a shared lock for
    // microseconds: retried, bounded.
    bool locked = false;
    for (int i = 0; i < 200 && !locked; ++i) {
        locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (!locked && errno != EWOULDBLOCK && errno != EINTR) break;  // no flock here (ENOLCK)
        if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    json j = {{"sky_ledger", kFormat},
              {"type", "pool"},
              {"pool", pool_id},
              {"provider", provider},
              {"region", region},
              {"pid", static_cast<long>(::getpid())},
              {"pid_start", process_identity(::getpid())},
              {"pid_ns", this_pid_namespace()},
              {"host", this_host()},
              {"machine_id", this_machine_id()},
              {"lock", locked},
              {"started", now_unix()}};
    const std::string line = dump(j) + "\n";
    int err = 0;
    if (write_all(fd, line, &err) != line.size() || ::fsync(fd) != 0) {
        if (err == 0) err = errno;
        ::close(fd);
        ::unlink(file.c_str());
        throw Error("cannot write pool ledger " + file.string() + ": " + errno_text(err));
    }
    // The file's name must survive a crash too: flush the directory entry.
    if (int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
        (void)::fsync(d);
        ::close(d);
    }
    return std::unique_ptr<Ledger>(new Ledger(file, fd));
}

std::unique_ptr<Ledger> Ledger::attach(const fs::path& file) {
    const int fd = ::open(file.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) throw Error("cannot open pool ledger " + file.string() + ": " + errno_text(errno));
    auto l = std::unique_ptr<Ledger>(new Ledger(file, fd));
    // A torn last line (its writer died mid-record) must not swallow the next record.
    char last = '\n';
    if (const off_t end = ::lseek(fd, 0, SEEK_END); end > 0 && ::pread(fd, &last, 1, end - 1) == 1)
        l->torn_ = last != '\n';
    return l;
}

void Ledger::record_collected(const LedgerRecord& record, const std::vector<std::string>& gone,
                              const std::vector<std::string>& infra_left) {
    auto l = attach(record.file);
    for (const auto& id : gone) l->instance_gone(id);
    if (!infra_left.empty() || !record.infra_left.empty()) l->infra_left(infra_left);
    l->close_collected();
}

void Ledger::append(const std::string& line) noexcept {
    std::lock_guard lk(m_);
    if (fd_ < 0) return;
    std::string data = (torn_ ? "\n" : "") + line + "\n";
    int err = 0;
    const std::size_t n = write_all(fd_, data, &err);
    if (n == data.size()) {
        torn_ = false;
        if (::fsync(fd_) == 0) return;
        err = errno;
    } else if (n > 0) {
        torn_ = true;
    }
    if (!warned_) {
        warned_ = true;
        spdlog::warn(
            "sky: cannot write the pool ledger {}: {} (`sky gc` may not find what this "
            "pool leaves behind)",
            file_.string(), errno_text(err));
    }
}

void Ledger::instance(const std::string& id) noexcept {
    try {
        append(dump({{"type", "instance"}, {"id", id}}));
    } catch (...) {  // allocation only
    }
}

void Ledger::region(std::string_view region) noexcept {
    try {
        append(dump({{"type", "region"}, {"region", region}}));
    } catch (...) {
    }
}

void Ledger::instance_gone(const std::string& id) noexcept {
    try {
        append(dump({{"type", "gone"}, {"id", id}}));
    } catch (...) {
    }
}

void Ledger::infra_left(const std::vector<std::string>& what) noexcept {
    try {
        append(dump({{"type", "infra"}, {"left", what}}));
    } catch (...) {
    }
}

void Ledger::budget(double max_total_usd, double max_hourly_usd) noexcept {
    try {
        append(dump({{"type", "budget"},
                     {"max_total_usd", max_total_usd},
                     {"max_hourly_usd", max_hourly_usd}}));
    } catch (...) {
    }
}

void Ledger::spent(double usd) noexcept {
    try {
        append(dump({{"type", "cost"}, {"spent_usd", usd}, {"at", now_unix()}}));
    } catch (...) {
    }
}

void Ledger::close() noexcept {
    try {
        append(dump({{"type", "closed"}, {"at", now_unix()}, {"by", "owner"}}));
    } catch (...) {
    }
}

void Ledger::close_collected() noexcept {
    try {
        append(dump({{"type", "closed"}, {"at", now_unix()}, {"by", "gc"}}));
    } catch (...) {
    }
}

LedgerRecord Ledger::read(const fs::path& file) {
    // A ledger tells gc what it may terminate: one that someone else wrote is not believed.
    const std::string text = read_private_file(file, kMaxFile);
    LedgerRecord r;
    r.file = file;
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
        const auto nl = text.find('\n', pos);
        if (nl == std::string::npos) break;  // a torn last record: its writer died mid-write
        const std::string_view line(text.data() + pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (line.empty()) continue;  // the separator written after a torn record
        json j = json::parse(line, nullptr, false);
        if (line_no == 1) {
            // Without its pool record nothing in the file can be trusted: not a ledger.
            if (j.is_discarded() || !j.is_object() || j.value("type", "") != "pool" ||
                !j.contains("sky_ledger"))
                throw Error(file.string() + ": not a pool ledger");
            try {
                if (j.at("sky_ledger").get<int>() > kFormat)
                    throw Error(file.string() + ": written by a newer sky (format " +
                                j.at("sky_ledger").dump() + ")");
                r.pool_id = j.at("pool").get<std::string>();
                r.provider = j.at("provider").get<std::string>();
                r.region = j.value("region", "");
                r.owner_pid = j.at("pid").get<long>();
                r.owner_start = j.value("pid_start", "");
                r.host = j.value("host", "");
                r.machine_id = j.value("machine_id", "");
                r.pid_namespace = j.value("pid_ns", "");
                r.locked = j.value("lock", false);
                r.started_unix = j.value("started", std::int64_t{0});
            } catch (const Error&) {
                throw;
            } catch (const std::exception& e) {
                throw Error(file.string() + ": bad pool record: " + e.what());
            }
            if (!safe_name(r.pool_id)) throw Error(file.string() + ": bad pool id");
            continue;
        }
        // A later record that cannot be read (a torn write that a later append completed into
        // a line, a damaged disk block) is skipped: the rest of the file still names machines
        // that gc must find.
        try {
            if (j.is_discarded() || !j.is_object()) throw std::runtime_error("not JSON");
            const std::string type = j.value("type", "");
            if (type == "region") {
                if (auto rg = j.at("region").get<std::string>(); !rg.empty()) r.region = rg;
            } else if (type == "instance") {
                r.instances.push_back(j.at("id").get<std::string>());
            } else if (type == "gone") {
                r.gone_instances.push_back(j.at("id").get<std::string>());
            } else if (type == "infra") {
                r.infra_left = j.at("left").get<std::vector<std::string>>();
            } else if (type == "budget") {
                r.limit_usd = j.value("max_total_usd", 0.0);
                r.hourly_limit_usd = j.value("max_hourly_usd", 0.0);
            } else if (type == "cost") {
                r.spent_usd = j.at("spent_usd").get<double>();
            } else if (type == "closed") {
                r.closed = true;
                r.closed_unix = j.value("at", std::int64_t{0});
                r.closed_by = j.value("by", "");
            }
            // Other types: a later sky's records, ignored.
        } catch (const std::exception&) {
            ++r.damaged_lines;
        }
    }
    if (line_no == 0 || r.pool_id.empty()) throw Error(file.string() + ": empty pool ledger");
    return r;
}

std::vector<LedgerRecord> Ledger::read_all(std::vector<std::string>* skipped) {
    std::vector<LedgerRecord> out;
    fs::path dir;
    try {
        dir = directory();
    } catch (const Error& e) {
        if (skipped) skipped->push_back(e.what());
        return out;
    }
    std::error_code exists_ec;
    if (!fs::exists(fs::symlink_status(dir, exists_ec))) return out;  // no ledger yet
    if (std::string why; !is_private_dir(dir, &why)) {
        if (skipped) skipped->push_back(why + ": no ledger read");
        return out;
    }
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (p.extension() != ".jsonl") continue;
        try {
            out.push_back(read(p));
        } catch (const std::exception& e) {
            if (skipped) skipped->push_back(e.what());
        }
    }
    if (ec && skipped) skipped->push_back("cannot list " + dir.string() + ": " + ec.message());
    std::sort(out.begin(), out.end(), [](const LedgerRecord& a, const LedgerRecord& b) {
        return a.started_unix != b.started_unix ? a.started_unix < b.started_unix
                                                : a.pool_id < b.pool_id;
    });
    return out;
}

}  // namespace sky::detail
