#include "pool/ledger.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
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

#include "sky/errors.hpp"

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

// Makes `dir` (and a missing parent) 0700, and refuses one that is a symlink or another user's:
// the ledger says which machines gc may terminate, so nobody else may write it.
void ensure_private_dir(const fs::path& dir) {
    // mkdir -p with 0700 for every missing component (~/.sky included when sky makes it).
    fs::path partial;
    for (const auto& part : dir) {
        partial /= part;
        if (partial == partial.root_path()) continue;
        if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
            throw Error("cannot create " + partial.string() + ": " + errno_text(errno));
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        throw Error("cannot read " + dir.string() + ": " + errno_text(errno));
    if (!S_ISDIR(st.st_mode)) throw Error(dir.string() + " is not a directory");
    if (st.st_uid != ::geteuid())
        throw Error(dir.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                    "): refusing to keep pool ledgers there");
    if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
        throw Error("cannot make " + dir.string() + " private: " + errno_text(errno));
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

LedgerRecord::Owner LedgerRecord::owner() const {
    if (!host.empty() && host != this_host()) return Owner::other_host;
    const std::string now = process_identity(owner_pid);
    return !now.empty() && now == owner_start ? Owner::alive : Owner::dead;
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
    json j = {{"sky_ledger", kFormat},
              {"type", "pool"},
              {"pool", pool_id},
              {"provider", provider},
              {"region", region},
              {"pid", static_cast<long>(::getpid())},
              {"pid_start", process_identity(::getpid())},
              {"host", this_host()},
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
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) throw Error("cannot read " + file.string() + ": " + errno_text(errno));
    std::string text;
    {
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
            static_cast<std::size_t>(st.st_size) > kMaxFile) {
            ::close(fd);
            throw Error(file.string() + ": not a pool ledger (not a regular file, or too large)");
        }
        // A ledger tells gc what it may terminate: one that someone else wrote is not believed.
        if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
            ::close(fd);
            throw Error(file.string() +
                        ": not trusted (owned by another user or writable by others)");
        }
        char buf[8192];
        for (;;) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            text.append(buf, static_cast<std::size_t>(n));
            if (text.size() > kMaxFile) break;
        }
        ::close(fd);
    }
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
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) return out;  // no ledger yet
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
        if (skipped)
            skipped->push_back(dir.string() +
                               ": not trusted (not a directory, another user's, or writable by "
                               "others): no ledger read");
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
