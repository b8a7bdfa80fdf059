#include "runtime/worker/worker.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/preemption.hpp"
#include "runtime/worker/crash_handler.hpp"
#include "runtime/worker_context.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::detail {

Worker::Worker(int fd, const WorkerLaunch& launch, std::unique_ptr<Listener> listener,
               std::string token, const std::optional<io::SealKeys>& keys)
    : conn_(std::make_unique<Connection>(fd, core_, keys)),
      out_(conn_->transport()),
      listener_(std::move(listener)),
      token_(std::move(token)),
      parent_pid_(launch.parent_pid),
      heartbeat_file_(launch.heartbeat_file),
      notice_file_(launch.notice_file),
      node_(core_, out_, launch.crash_file),
      background_(core_) {
    if (!install_crash_handler(launch.crash_file))
        core_.say(fmt::format("cannot open the crash file {}: {}; a crash will not say where",
                              launch.crash_file, std::strerror(errno)));
}

Worker::~Worker() {
    close_door();
    if (door_wake_ >= 0) ::close(door_wake_);
    OPENSSL_cleanse(token_.data(), token_.size());
}

int Worker::run() {
    // The hello goes out before output capture starts, so no log frame can come first.
    if (!conn_->send_hello()) return 3;
    capture_ = std::make_unique<OutputCapture>(
        [this](std::uint64_t id, std::uint8_t s, std::string_view line) {
            try {
                out_.log(id, s, line);
            } catch (...) {
            }
        });
    core_.err_fd = capture_->original_stderr();
    const auto [out_fd, err_fd] = capture_->pipe_read_fds();
    crash_output_fds(out_fd, err_fd);
    if (!handshake()) return 3;
    limits_.parent_pid = parent_pid_;
    background_.start_watchdog(limits_);
    if (collect_metrics_) background_.start_metrics(out_, metrics_interval_);
    // Progress reaches the client within a second of each change (api.md §10a).
    background_.start_progress(out_, std::chrono::milliseconds(50));
    // A notice the node's launcher learned of reaches the client within 250 ms (api.md §10a).
    if (!notice_file_.empty())
        background_.start_notices(out_, notice_file_, std::chrono::milliseconds(250));
    node_.start_relays();
    // Calls run on executor threads, never on the reading thread: the connection is read all
    // the time, so heartbeats, cancels and a vanished client are seen while calls run.
    executor_ = std::make_unique<Executor>(
        core_, out_, *capture_, [this](const CallPlugin& plugin) { return plugin_env(plugin); });
    executor_->keep_answered(reconnect_bound_.count() > 0);
    node_.keep_answered(reconnect_bound_.count() > 0);
    if (listener_ && reconnect_bound_.count() > 0) {
        door_wake_ = ::eventfd(0, EFD_CLOEXEC);
        door_ = std::thread([this] { door(); });
    }
    if (!node_.relaying()) executor_->start(concurrency_);
    const auto heard = [this] {
        core_.last_heard.store(steady_seconds());
        touch_heartbeat();
    };
    for (;;) {
        const Connection::End end = conn_->serve(*this, out_, heard);
        if (end != Connection::End::shutdown && resume()) continue;
        const int code = end == Connection::End::broken ? 4 : 0;
        if (core_.running.load() > 0) {
            // Nobody can receive these results: a rented node must not run on for them.
            core_.say(fmt::format("the client connection ended while {} call(s) ran; exiting",
                                  core_.running.load()));
            node_.stop();
            ::_exit(code);
        }
        finish();
        return code;
    }
}

bool Worker::resume() {
    if (!listener_ || reconnect_bound_.count() <= 0) return false;
    conn_->close();  // first: a write blocked on the dead connection returns
    out_.detach();
    const auto deadline = std::chrono::steady_clock::now() + reconnect_bound_;
    core_.say(
        fmt::format("the client connection dropped; waiting up to {} s for the client to "
                    "come back ({} call(s) running, {} answer(s) kept)",
                    reconnect_bound_.count(), core_.running.load(), out_.kept()));
    for (;;) {
        std::unique_ptr<Connection> next;
        {
            // The door thread accepts, authenticates and reads the hello.
            std::unique_lock lk(door_m_);
            door_cv_.wait_until(lk, deadline, [&] { return comeback_ != nullptr; });
            next = std::move(comeback_);
        }
        if (!next) {
            core_.say(
                fmt::format("the client did not come back within {} s", reconnect_bound_.count()));
            return false;
        }
        if (!next->send_ready(ready_, max_frame_)) continue;
        {
            std::lock_guard lk(door_m_);
            conn_ = std::move(next);
        }
        core_.last_heard.store(steady_seconds());
        // What the client may have missed: which calls run, and every answer it has not
        // acknowledged, in order.
        out_.attach(conn_->transport(), [this] { return started_calls(); });
        core_.say("the client came back; serving the resumed session");
        return true;
    }
}

void Worker::door() {
    for (;;) {
        {
            std::lock_guard lk(door_m_);
            if (door_closed_) return;
        }
        // One authenticator for as long as the door is open: a handshake in progress is never
        // cut off by a round's end (a resume over a slow link); close_door() wakes it.
        std::optional<io::SealKeys> keys;
        // (Without an eventfd, rounds of a second, as close_door() must be heard.)
        const auto round =
            door_wake_ >= 0 ? std::chrono::seconds(24 * 3600) : std::chrono::seconds(1);
        const int fd = listener_->accept_authenticated(
            token_, std::chrono::steady_clock::now() + round, &keys, door_wake_);
        if (fd < 0) continue;
        auto next = std::make_unique<Connection>(fd, core_, keys);
        ClientHello ch;
        if (!next->send_hello() || !next->read_hello(ch, std::chrono::seconds(10))) continue;
        if (!ch.resume || ch.session != session_) {
            // Another client (or a fresh start of this one) while this session lasts: not ours.
            core_.say(ch.resume ? "refusing a connection that resumes another session"
                                : "refusing a new session while this one lasts");
            continue;
        }
        {
            std::lock_guard lk(door_m_);
            if (door_closed_) return;
            comeback_ = std::move(next);  // a newer one replaces one not taken yet
            // The client gave the current connection up: its reader ends and resumes.
            if (conn_) conn_->close();
        }
        door_cv_.notify_all();
    }
}

void Worker::close_door() {
    {
        std::lock_guard lk(door_m_);
        door_closed_ = true;
    }
    if (door_wake_ >= 0) {
        const std::uint64_t one = 1;
        (void)!::write(door_wake_, &one, sizeof one);
    }
    if (door_.joinable()) door_.join();
}

std::vector<std::uint64_t> Worker::started_calls() const {
    return node_.relaying() ? node_.started() : executor_->started();
}

bool Worker::handshake() {
    ClientHello ch;
    if (!conn_->read_hello(ch)) return false;
    if (ch.resume) {
        core_.say("the client resumes a session this worker never had; closing");
        return false;
    }
    session_ = ch.session;
    // The pool's environment where it could not travel with the launch (a sealed stream's
    // hello): set before the worker processes start and before any call runs.
    if (ch.env_names.size() != ch.env_values.size()) {
        core_.say("the client's hello names more variables than values; closing");
        return false;
    }
    for (std::size_t k = 0; k < ch.env_names.size(); ++k) {
        const std::string& name = ch.env_names[k];
        if (name.empty() || name.find_first_of("=") != std::string::npos ||
            ::setenv(name.c_str(), ch.env_values[k].c_str(), 1) != 0) {
            core_.say(fmt::format("cannot set the pool's variable '{}'; closing", name));
            return false;
        }
    }
    // A Local worker's socketpair has no listener to come back to: nothing to wait for.
    if (listener_ && ch.reconnect_bound_s > 0 && !session_.empty()) {
        reconnect_bound_ = std::chrono::seconds(std::min<std::int64_t>(ch.reconnect_bound_s, 3600));
        out_.set_resumable(true);
    } else {
        listener_.reset();
        OPENSSL_cleanse(token_.data(), token_.size());
        token_.clear();
    }
    auto& info = worker_instance();
    {
        std::lock_guard lk(worker_instance_mutex());
        info.node = ch.node;
        info.total_nodes = ch.total_nodes;
        info.is_head = ch.node == 0;
        info.accelerators = ch.accelerators;
        info.head_addr = ch.head_addr;
        info.head_port = ch.head_port;
        info.job_id = ch.pool_id;
        info.private_addr = ch.private_addr.empty() ? ch.head_addr : ch.private_addr;
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
    }
    concurrency_ = std::max(1, ch.concurrency);
    limits_.idle_timeout = std::chrono::seconds(std::max<std::int64_t>(1, ch.idle_timeout_s));
    limits_.hard_timeout = std::chrono::seconds(std::max<std::int64_t>(1, ch.hard_timeout_s));
    max_frame_ = ch.max_frame;
    collect_metrics_ = ch.collect_metrics;
    metrics_interval_ =
        std::chrono::milliseconds(std::max<std::int64_t>(100, ch.metrics_interval_ms));
    if (!node_.plan_and_start(ch, max_frame_, ready_)) return false;
    // The interface that carries this node's private address, for GLOO/NCCL_SOCKET_IFNAME.
    interface_ = interface_for_address(info.private_addr);
    if (!conn_->send_ready(ready_, max_frame_)) return false;
    in_worker.store(true, std::memory_order_release);
    return true;
}

void Worker::on_call(Frame& f) {
    // A call id runs once: a call sent again after a resume is answered from what is kept,
    // or left to run where it runs.
    if (out_.resend(f.header.call_id)) return;
    if (node_.relaying())
        node_.relay_call(f);
    else
        executor_->submit(f);
}

void Worker::on_frames_taken() {
    if (executor_ && !node_.relaying()) executor_->kick();
}

void Worker::on_ack(std::span<const std::uint64_t> call_ids) {
    out_.ack(call_ids);
    if (executor_) executor_->forget(call_ids);
    node_.forget(call_ids);
}

void Worker::on_cancel(std::uint64_t call_id) {
    if (node_.relaying())
        node_.relay_control(MsgType::cancel, call_id);
    else
        executor_->cancel(call_id);
}

void Worker::on_confirm(std::uint64_t call_id) {
    if (node_.relaying())
        node_.relay_control(MsgType::confirm, call_id);
    else
        executor_->confirm(call_id);
}

void Worker::on_layout(std::span<const std::byte> payload) {
    PoolLayout l;
    try {
        load_from(payload, l);
    } catch (const std::exception& e) {
        core_.say(fmt::format("ignoring an unreadable layout frame: {}", e.what()));
        return;
    }
    {
        std::lock_guard lk(worker_instance_mutex());
        auto& info = worker_instance();
        info.peers = l.peers;
        if (!l.peers.empty()) info.head_addr = l.peers.front();
        if (!l.ports.empty() && !l.ports.front().empty()) info.head_port = l.ports.front().front();
    }
    {
        std::lock_guard lk(layout_m_);
        layout_ = std::move(l);
    }
    node_.send_all(MsgType::layout, payload);
}

void Worker::on_preempt(std::span<const std::byte> payload) {
    try {
        // Published first: this process's calls see it before its worker processes do.
        publish_preemption(decode_preempt(payload));
    } catch (const std::exception& e) {
        core_.say(fmt::format("ignoring an unreadable preempt frame: {}", e.what()));
        return;
    }
    node_.send_all(MsgType::preempt, payload);
}

EnvVars Worker::plugin_env(const CallPlugin& plugin) {
    RankPlace place;
    {
        std::lock_guard lk(worker_instance_mutex());
        place.node = worker_instance().node;
        place.worker = worker_instance().worker;
    }
    place.interface = interface_;
    PoolLayout l;
    {
        std::lock_guard lk(layout_m_);
        l = layout_;
    }
    return rendezvous_env(PluginSpec{plugin.kind, plugin.backend}, l, place);
}

void Worker::touch_heartbeat() {
    if (heartbeat_file_.empty()) return;
    double now = steady_seconds();
    if (now - last_touch_ < 1.0) return;
    last_touch_ = now;
    ::utimensat(AT_FDCWD, heartbeat_file_.c_str(), nullptr, 0);
}

void Worker::finish() {
    close_door();
    if (executor_) executor_->stop();
    node_.stop();
    background_.stop();
    try {
        out_.flush();
    } catch (...) {
    }
}

int run_worker(int fd, const WorkerLaunch& launch, std::unique_ptr<Listener> listener,
               std::string token, const std::optional<io::SealKeys>& keys) {
    // Keep freed memory in the heap instead of returning it to the kernel: a worker that
    // receives large arguments over and over then reuses pages instead of faulting in fresh
    // ones (about 5x the cost of copying them). Memory stays at the high-water mark.
    ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    Worker w(fd, launch, std::move(listener), std::move(token), keys);
    return w.run();
}

}  // namespace sky::detail
