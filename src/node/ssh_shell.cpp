#include "node/ssh_shell.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "ssh/session.hpp"

namespace sky::detail::node {

struct SshShell::State {
    ssh::SessionOptions options;
    mutable std::mutex session_m;
    std::shared_ptr<ssh::Session> session;
    std::uint64_t connection = 0;
    std::mutex reconnect_m;
    bool closed = false;
    std::once_flag learned;
    std::string home, user;
    // Exec channels in use on the connection.
    std::mutex slot_m;
    std::condition_variable slot_cv;
    int running = 0;
    static constexpr int max_exec = 8;

    std::shared_ptr<ssh::Session> current() const {
        std::lock_guard lk(session_m);
        return session;
    }
};

namespace {
// One of the session's exec channels, held for a command's length.
class Slot {
public:
    Slot(std::mutex& m, std::condition_variable& cv, int& running, int max)
        : m_(m), cv_(cv), running_(running) {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return running_ < max; });
        ++running_;
    }
    ~Slot() {
        {
            std::lock_guard lk(m_);
            --running_;
        }
        cv_.notify_one();
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

private:
    std::mutex& m_;
    std::condition_variable& cv_;
    int& running_;
};
}  // namespace

SshShell::SshShell(const ssh::SessionOptions& options, std::string home)
    : s_(std::make_unique<State>()) {
    s_->options = options;
    s_->session = std::make_shared<ssh::Session>(options);
    if (!home.empty()) {
        s_->home = std::move(home);
        s_->user = options.user;
        std::call_once(s_->learned, [] {});
    }
}

SshShell::~SshShell() { close(); }

CommandOutcome SshShell::run(const std::vector<std::string>& argv, const RunOptions& options) {
    const std::string command = shell_command(argv);
    const auto session = s_->current();
    if (!session) throw ssh::ConnectionLost("the SSH connection was closed");
    Slot slot(s_->slot_m, s_->slot_cv, s_->running, State::max_exec);
    ssh::ExecOptions eo;
    eo.stdin_data = std::string(options.stdin_data);
    eo.timeout = options.timeout;
    eo.on_stdout = options.on_stdout;
    eo.on_stderr = options.on_stderr;
    CommandOutcome o;
    try {
        auto r = session->exec(command, eo);
        o.status = r.exit_status;
        o.out = std::move(r.out);
        o.err = std::move(r.err);
    } catch (const TimeoutError&) {
        o.timed_out = true;
    }
    return o;
}

void SshShell::upload(const ByteSource& read, const std::string& path, int mode,
                      const std::function<void(std::uint64_t)>& progress) {
    const auto session = s_->current();
    if (!session) throw ssh::ConnectionLost("the SSH connection was closed");
    session->upload(read, path, mode, progress);
}

const std::string& SshShell::home() const {
    std::call_once(s_->learned, [&] {
        auto r = const_cast<SshShell*>(this)->run({"sh", "-c", "echo \"$HOME\"; id -un"},
                                                  std::chrono::seconds(30));
        std::istringstream is(r.out);
        std::getline(is, s_->home);
        std::getline(is, s_->user);
        if (r.status != 0 || s_->home.empty() || s_->user.empty())
            throw Error(fmt::format("cannot learn the home directory and user on {}: {}",
                                    describe(), r.summary()));
    });
    return s_->home;
}

const std::string& SshShell::user() const {
    home();
    return s_->user;
}

std::unique_ptr<io::Stream> SshShell::open_channel(const std::string& host, std::uint16_t port,
                                                   std::chrono::milliseconds timeout) {
    const auto session = s_->current();
    if (!session) throw ssh::ConnectionLost("the SSH connection was closed");
    try {
        return session->open_tunnel(host, port, timeout);
    } catch (const ssh::ChannelError& e) {
        throw ChannelRefused(e.what());
    }
}

std::unique_ptr<io::Stream> SshShell::open_unix_socket(const std::string& path,
                                                       std::chrono::milliseconds timeout) {
    const auto session = s_->current();
    if (!session) throw ssh::ConnectionLost("the SSH connection was closed");
    try {
        return session->open_unix_socket(path, timeout);
    } catch (const ssh::ChannelError& e) {
        throw ChannelRefused(e.what());
    }
}

bool SshShell::reconnect(std::chrono::milliseconds within) {
    std::lock_guard rl(s_->reconnect_m);
    if (s_->closed) throw Error("the connection to " + describe() + " was closed");
    if (alive()) return false;
    auto o = s_->options;
    o.connect_attempts = 1;
    // At most 5 s: a connect begun while the link was down must not hold the next attempt back
    // long after it is up again (SYN retries back off).
    o.connect_timeout =
        std::min({within, s_->options.connect_timeout, std::chrono::milliseconds(5000)});
    auto fresh = std::make_shared<ssh::Session>(o);
    std::lock_guard lk(s_->session_m);
    s_->session = std::move(fresh);
    ++s_->connection;
    return true;
}

std::uint64_t SshShell::connection() const {
    std::lock_guard lk(s_->session_m);
    return s_->connection;
}

void SshShell::drop(std::uint64_t connection) noexcept {
    std::shared_ptr<ssh::Session> s;
    {
        std::lock_guard lk(s_->session_m);
        if (connection != s_->connection) return;  // already replaced
        s = s_->session;
    }
    if (s) s->close();
}

void SshShell::hold(const std::vector<std::string>& argv) {
    const auto session = s_->current();
    if (!session) throw sky::Error("the connection to " + describe() + " was closed");
    session->async_exec(shell_command(argv),
                        {.on_stdout = [](std::string_view) {}, .on_stderr = [](std::string_view) {}},
                        [](std::exception_ptr, ssh::ExecResult) {});
}

std::string SshShell::describe() const {
    const auto& o = s_->options;
    const bool v6 = o.host.find(':') != std::string::npos;
    return fmt::format("{}@{}{}{}:{}", o.user, v6 ? "[" : "", o.host, v6 ? "]" : "", o.port);
}

bool SshShell::alive() const {
    const auto s = s_->current();
    return s && s->alive();
}

void SshShell::close() noexcept {
    std::lock_guard rl(s_->reconnect_m);
    s_->closed = true;
    if (const auto s = s_->current()) s->close();
}

std::shared_ptr<ssh::Session> SshShell::session() const { return s_->current(); }

}  // namespace sky::detail::node
