#include "providers/slurm/login.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "io/fd_stream.hpp"
#include "providers/slurm/slurm_commands.hpp"
#include "runtime/fd_transport.hpp"
#include "ship/closure.hpp"
#include "ship/shipment.hpp"
#include "ssh/session.hpp"
#include "util/env.hpp"
#include "util/shell.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace sky::detail::slurm {

namespace fs = std::filesystem;

std::string CommandOutcome::summary() const {
    if (timed_out) return "it timed out";
    std::string last;
    std::istringstream is(err.empty() ? out : err);
    for (std::string l; std::getline(is, l);)
        if (!trim(l).empty()) last = std::string(trim(l));
    if (last.size() > 400) last = last.substr(0, 400) + "...";
    return last.empty() ? fmt::format("exit status {}", status)
                        : fmt::format("exit status {}: {}", status, last);
}

namespace {

// The login node over one SSH session: every command an exec channel, every worker stream a
// direct-tcpip channel from there. sshd allows 10 sessions (exec channels) per connection by
// default (MaxSessions): at most 8 commands run at once here.
class SshLogin final : public LoginShell {
public:
    SshLogin(const LoginOptions& o, const LoginAddress& a) : address_(a) {
        ssh::SessionOptions so;
        so.host = a.host;
        so.port = static_cast<std::uint16_t>(a.port);
        so.user = a.user.empty() ? local_user() : a.user;
        so.private_key_file =
            o.identity_file.empty() ? home_path(".ssh/id_ed25519") : o.identity_file;
        so.host_key = ssh::HostKeyPin::known_hosts(
            o.known_hosts.empty() ? home_path(".ssh/known_hosts") : o.known_hosts);
        so.connect_timeout = o.connect_timeout;
        so.connect_attempts = o.connect_attempts;
        address_.user = so.user;
        options_ = so;
        session_ = std::make_shared<ssh::Session>(so);
        auto r = run({"sh", "-c", "echo \"$HOME\"; id -un"}, std::chrono::seconds(30));
        std::istringstream is(r.out);
        std::getline(is, home_);
        std::getline(is, user_);
        if (r.status != 0 || home_.empty() || user_.empty())
            throw Error(fmt::format("slurm: cannot learn the home directory and user on {}: {}",
                                    describe(), r.summary()));
    }
    ~SshLogin() override { close(); }

    CommandOutcome run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                       std::string_view stdin_data = {}) override {
        const std::string command = shell_command(argv);
        const auto session = current();
        Slot slot(*this);
        CommandOutcome o;
        try {
            auto r =
                session->exec(command, {.stdin_data = std::string(stdin_data), .timeout = timeout});
            o.status = r.exit_status;
            o.out = std::move(r.out);
            o.err = std::move(r.err);
        } catch (const TimeoutError&) {
            o.timed_out = true;
        }
        return o;
    }
    const std::string& home() const override { return home_; }
    const std::string& user() const override { return user_; }

    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override {
        return current()->open_tunnel(host, port, timeout);
    }

    bool reconnect(std::chrono::milliseconds within) override {
        std::lock_guard rl(reconnect_m_);
        if (closed_) throw Error("slurm: the connection to " + describe() + " was closed");
        if (alive()) return false;
        auto o = options_;
        o.connect_attempts = 1;
        // At most 5 s: a connect begun while the link was down must not hold the next attempt
        // back long after it is up again (SYN retries back off).
        o.connect_timeout =
            std::min({within, options_.connect_timeout, std::chrono::milliseconds(5000)});
        auto fresh = std::make_shared<ssh::Session>(o);
        std::lock_guard lk(session_m_);
        session_ = std::move(fresh);
        ++connection_;
        return true;
    }

    std::uint64_t connection() const override {
        std::lock_guard lk(session_m_);
        return connection_;
    }

    void drop(std::uint64_t connection) noexcept override {
        std::shared_ptr<ssh::Session> s;
        {
            std::lock_guard lk(session_m_);
            if (connection != connection_) return;  // already replaced
            s = session_;
        }
        if (s) s->close();
    }

    std::string ship_program(const std::string& event_id, const std::string& run_dir,
                             const std::function<void(Event)>& emit) override {
        ship::PoolShipment shipment(ship::this_program());
        ship::NodeSite site;
        site.node = 0;
        site.instance_id = event_id;
        const auto session = current();
        site.session = session.get();
        site.home = home_;
        site.run_dir = run_dir;
        site.peer_address = address_.host;
        Slot slot(*this);
        std::string dir = shipment.ship(site, emit);
        shipment.forget(0);
        return dir;
    }

    void hold(const std::vector<std::string>& argv) override {
        // Not a Slot: it holds its channel for the pool's life (MaxSessions 10 leaves room).
        current()->async_exec(
            shell_command(argv),
            {.on_stdout = [](std::string_view) {}, .on_stderr = [](std::string_view) {}},
            [](std::exception_ptr, ssh::ExecResult) {});
    }

    std::string describe() const override { return address_.to_string(); }
    bool alive() const override {
        const auto s = current();
        return s && s->alive();
    }
    void close() noexcept override {
        std::lock_guard rl(reconnect_m_);
        closed_ = true;
        if (const auto s = current()) s->close();
    }

private:
    // The session in use; a reconnect replaces it while commands on the old one still end.
    std::shared_ptr<ssh::Session> current() const {
        std::lock_guard lk(session_m_);
        return session_;
    }
    static std::string local_user() {
        if (const passwd* p = ::getpwuid(::geteuid())) return p->pw_name;
        return env_or("USER", "root");
    }
    // One of the session's exec channels, held for a command's length.
    class Slot {
    public:
        explicit Slot(SshLogin& l) : l_(l) {
            std::unique_lock lk(l_.m_);
            l_.cv_.wait(lk, [&] { return l_.running_ < kMaxExec; });
            ++l_.running_;
        }
        ~Slot() {
            {
                std::lock_guard lk(l_.m_);
                --l_.running_;
            }
            l_.cv_.notify_one();
        }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        SshLogin& l_;
    };
    static constexpr int kMaxExec = 8;

    LoginAddress address_;
    ssh::SessionOptions options_;
    mutable std::mutex session_m_;
    std::shared_ptr<ssh::Session> session_;
    std::uint64_t connection_ = 0;
    std::mutex reconnect_m_;
    bool closed_ = false;
    std::string home_, user_;
    std::mutex m_;
    std::condition_variable cv_;
    int running_ = 0;
};

// This machine is the login node: commands are subprocesses, streams plain TCP connections.
class LocalLogin final : public LoginShell {
public:
    LocalLogin() {
        home_ = env_or("HOME");
        const passwd* p = ::getpwuid(::geteuid());
        if (home_.empty() && p) home_ = p->pw_dir;
        user_ = p ? p->pw_name : env_or("USER");
        if (home_.empty() || user_.empty())
            throw Error("slurm: cannot learn this machine's home directory and user");
    }

    CommandOutcome run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                       std::string_view stdin_data = {}) override {
        auto r = run_subprocess(argv, {}, timeout, 16u << 20, stdin_data);
        return {r.status, std::move(r.output), std::move(r.errors), r.timed_out};
    }
    const std::string& home() const override { return home_; }
    const std::string& user() const override { return user_; }

    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override {
        const int fd = connect_tcp(host, port, timeout);
        return std::make_unique<io::FdStream>(fd, fmt::format("tcp to {}:{}", host, port));
    }

    std::string ship_program(const std::string& event_id, const std::string& run_dir,
                             const std::function<void(Event)>& emit) override {
        (void)run_dir;
        // The store's layout, as on a remote node: ~/.sky/prog/<id>/<name>, made whole in a
        // private directory and renamed into place.
        const auto& m = ship::this_program();
        const fs::path prog = ship::program_dir(home_, m);
        if (fs::exists(prog / ".complete")) {
            emit(BootstrapProgress{event_id, "cached"});
            return prog.string();
        }
        emit(BootstrapProgress{event_id, "copy", 0, m.total_bytes()});
        const fs::path tmp = prog.string() + fmt::format(".tmp-{}", ::getpid());
        std::error_code ec;
        fs::remove_all(tmp, ec);
        fs::create_directories(tmp / "lib", ec);
        if (ec) throw Error(fmt::format("cannot make {}: {}", tmp.string(), ec.message()));
        // Private, as the store on a node: ~/.sky and the directory being made.
        fs::permissions(fs::path(home_) / ".sky", fs::perms::owner_all, ec);
        fs::permissions(tmp, fs::perms::owner_all, ec);
        std::uint64_t done = 0;
        for (const auto& f : m.files) {
            fs::copy_file(f.source, tmp / f.name, fs::copy_options::overwrite_existing, ec);
            if (ec) {
                fs::remove_all(tmp, ec);
                throw Error(fmt::format("cannot copy {} into {}: {}", f.source.string(),
                                        tmp.string(), ec.message()));
            }
            done += f.size;
        }
        if (int fd = ::open((tmp / ".complete").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            fd >= 0)
            ::close(fd);
        fs::rename(tmp, prog, ec);
        if (ec) fs::remove_all(tmp, ec);  // another pool made it meanwhile
        if (!fs::exists(prog / ".complete"))
            throw Error("could not assemble the program directory " + prog.string());
        emit(BootstrapProgress{event_id, "copy", done, m.total_bytes()});
        return prog.string();
    }

    std::string describe() const override { return "this machine"; }
    bool alive() const override { return true; }
    void close() noexcept override {}

private:
    std::string home_, user_;
};

}  // namespace

std::unique_ptr<LoginShell> open_login(const LoginOptions& o) {
    if (o.login.empty()) return std::make_unique<LocalLogin>();
    return std::make_unique<SshLogin>(o, parse_login(o.login));
}

}  // namespace sky::detail::slurm
