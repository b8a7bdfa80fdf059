// sky::Simulated's machine records (machine_records.hpp).
#include "providers/simulated/machine_records.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ledger/ledger.hpp"
#include "util/private_files.hpp"

namespace sky::detail::simulated {

namespace fs = std::filesystem;
using State = CloudInstance::State;
using nlohmann::json;

fs::path records_dir() {
    try {
        return Ledger::directory().parent_path() / "simulated";
    } catch (const std::exception&) {
        return {};  // no home: records are this process's alone
    }
}

// Ids name files: only what sky makes ("sim-<pool id>-<hex>") is looked up.
bool safe_id(std::string_view id) {
    if (id.empty() || id.size() > 100 || id.rfind("sim-", 0) != 0) return false;
    return std::all_of(id.begin(), id.end(),
                       [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
}

void write_record(const Record& r) noexcept {
    try {
        const fs::path dir = records_dir();
        if (dir.empty() || !safe_id(r.id)) return;
        ensure_private_dir(dir);  // throws for a directory another user could write
        json j = {{"id", r.id},
                  {"pool", r.pool},
                  {"instance_type", r.instance_type},
                  {"node", r.node},
                  {"spot", r.spot},
                  {"owner_pid", r.owner_pid},
                  {"owner_start", r.owner_start},
                  {"worker_pid", r.worker_pid},
                  {"worker_start", r.worker_start}};
        const std::string text = j.dump() + "\n";
        const fs::path tmp = dir / (r.id + ".tmp");
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return;
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        if (ok) ok = ::rename(tmp.c_str(), (dir / (r.id + ".json")).c_str()) == 0;
        if (!ok) ::unlink(tmp.c_str());
    } catch (...) {
        // Best effort: the machine still is in this process's table and in the ledger.
    }
}

void remove_record(const std::string& id) noexcept {
    const fs::path dir = records_dir();
    if (dir.empty() || !safe_id(id)) return;
    std::error_code ec;
    fs::remove(dir / (id + ".json"), ec);
}

// A record tells `sky gc` which process to SIGKILL: believed only in a private directory, from a
// file of this user that nobody else could write (never through a symbolic link).
std::optional<Record> read_record(const fs::path& file) noexcept {
    try {
        if (!is_private_dir(file.parent_path())) return std::nullopt;
        const json j = json::parse(read_private_file(file, 64 * 1024));
        Record r;
        r.id = j.at("id").get<std::string>();
        r.pool = j.at("pool").get<std::string>();
        r.instance_type = j.at("instance_type").get<std::string>();
        r.node = j.at("node").get<int>();
        r.spot = j.at("spot").get<bool>();
        r.owner_pid = j.at("owner_pid").get<long>();
        r.owner_start = j.at("owner_start").get<std::string>();
        r.worker_pid = j.at("worker_pid").get<long>();
        r.worker_start = j.at("worker_start").get<std::string>();
        if (!safe_id(r.id)) return std::nullopt;
        return r;
    } catch (...) {
        return std::nullopt;  // torn or foreign: not a machine
    }
}

std::optional<Record> find_record(const std::string& id) {
    const fs::path dir = records_dir();
    if (dir.empty() || !safe_id(id)) return std::nullopt;
    return read_record(dir / (id + ".json"));
}

std::vector<Record> all_records() {
    std::vector<Record> out;
    const fs::path dir = records_dir();
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return out;
    int seen = 0;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        if (++seen > 100000) break;
        if (it->path().extension() != ".json") continue;
        if (auto r = read_record(it->path())) out.push_back(std::move(*r));
    }
    return out;
}

// A machine runs while its worker does; before it has one, while its client does.
bool record_alive(const Record& r) {
    if (r.worker_pid > 0) {
        const std::string now = process_identity(r.worker_pid);
        return !now.empty() && now == r.worker_start;
    }
    const std::string now = process_identity(r.owner_pid);
    return !now.empty() && now == r.owner_start;
}

CloudInstance instance_of(const Record& r, bool alive) {
    CloudInstance i;
    i.id = r.id;
    i.state = alive ? State::running : State::gone;
    i.public_ip = i.private_ip = "127.0.0.1";
    i.spot = r.spot;
    i.pool_id = r.pool;
    i.instance_type = r.instance_type;
    if (!alive) i.reason = "its process has ended";
    return i;
}

CloudInstance describe_record(const std::string& id) {
    if (auto r = find_record(id)) {
        const bool alive = record_alive(*r);
        if (!alive) remove_record(id);
        return instance_of(*r, alive);
    }
    CloudInstance u;
    u.id = id;
    u.state = State::unknown;
    return u;
}

void terminate_record(const std::string& id) {
    auto r = find_record(id);
    if (!r) return;
    // Only the recorded process: the identity check keeps a reused pid safe.
    if (r->worker_pid > 0 && process_identity(r->worker_pid) == r->worker_start)
        ::kill(static_cast<pid_t>(r->worker_pid), SIGKILL);
    remove_record(id);
}

}  // namespace sky::detail::simulated
