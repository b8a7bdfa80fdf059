#pragma once
/// \file A Backend (pool/backend.hpp) whose nodes are scripted workers: each connect() or
/// reconnect() is a socketpair whose far end a script plays on a thread of its own, speaking the
/// worker's side of the wire protocol (runtime/protocol.hpp) with the real authentication. No
/// process, no machine: PoolCore's reconnect, replacement, loss and resync run in a unit test.
/// Header-only.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io/fd_stream.hpp"
#include "pool/backend.hpp"
#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/preemption.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::test {

/// The worker's end of one connection, as a script sees it.
class FakeWorker {
public:
    FakeWorker(detail::FdTransport& t, int node, int attempt)
        : t_(t), frames_(t, 64u << 20), node_(node), attempt_(attempt) {}

    /// Which node, and which of its connections (0: the first connect; replacements and
    /// reconnects count on).
    [[nodiscard]] int node() const noexcept { return node_; }
    [[nodiscard]] int attempt() const noexcept { return attempt_; }

    /// The worker's side of the handshake: its hello, the client's hello read, its ready frame
    /// (one worker process). Returns the client's hello.
    detail::ClientHello greet() {
        detail::WorkerHello wh;
        wh.build_id = detail::self_build_id();
        send_value(detail::MsgType::hello, 0, wh);
        detail::Frame f;
        if (!frames_.next(f) || f.header.type != detail::MsgType::hello)
            throw std::runtime_error("fake worker: no client hello");
        detail::ClientHello ch;
        detail::load_each(f.payload, ch);
        detail::WorkerReady r;
        r.workers = 1;
        r.ports = {40000 + node_};
        send_value(detail::MsgType::ready, 0, r);
        return ch;
    }

    /// The next frame from the client that is a call (answering heartbeats on the way, and
    /// dropping layout, ack, confirm and cancel frames); nullopt when the client closed or
    /// said shutdown.
    std::optional<std::uint64_t> next_call() {
        detail::Frame f;
        for (;;) {
            try {
                if (!frames_.next(f)) return std::nullopt;
            } catch (const std::exception&) {
                return std::nullopt;
            }
            switch (f.header.type) {
                case detail::MsgType::call: {
                    const auto h = detail::decode_call(
                        detail::decode_call_plugin(f.payload, f.header.flags, plugin_));
                    last_args_.clear();
                    last_args_.append(h.args.data(), h.args.size());
                    return f.header.call_id;
                }
                case detail::MsgType::heartbeat:
                    heartbeat();
                    break;
                case detail::MsgType::shutdown:
                    return std::nullopt;
                default:
                    break;
            }
        }
    }
    /// The arguments of the call next_call() returned last.
    [[nodiscard]] const detail::Buffer& args() const noexcept { return last_args_; }

    /// Answers call `id` with `payload` as its result.
    void result(std::uint64_t id, const detail::Buffer& payload) {
        send_raw(detail::MsgType::result, id, payload.span());
    }
    /// Says call `id` is about to run.
    void started(std::uint64_t id) { send_raw(detail::MsgType::started, id, {}); }
    void heartbeat() { send_raw(detail::MsgType::heartbeat, 0, {}); }
    /// Waits for the client's next heartbeat (answering nothing, dropping other frames);
    /// false when the client closed first.
    bool await_heartbeat() {
        detail::Frame f;
        try {
            while (frames_.next(f))
                if (f.header.type == detail::MsgType::heartbeat) return true;
        } catch (const std::exception&) {
        }
        return false;
    }
    /// Serves until the client closes: every call is answered with its own arguments.
    void echo() {
        while (auto id = next_call()) result(*id, last_args_);
    }
    /// Ends the connection (the worker's side of a drop).
    void close() noexcept { t_.shutdown(); }
    /// Reports sky::progress's latest step (none: no call reports any more).
    void progress(std::optional<std::int64_t> step) {
        detail::Buffer out;
        detail::append_progress_frame(out, step);
        std::span<const std::byte> one[] = {out.span()};
        t_.write_all(one);
    }
    /// Forwards a notice the node's launcher learned of (a notice frame).
    void notice(const detail::NodeNotice& n) {
        const detail::Buffer p = detail::encode_notice(n);
        send_raw(detail::MsgType::notice, 0, p.span());
    }
    /// Waits for the client's next preempt frame (answering heartbeats, dropping other
    /// frames): the notice that stands (nullopt inside: withdrawn); nullopt outside when the
    /// client closed first.
    std::optional<std::optional<Preemption>> await_preempt() {
        detail::Frame f;
        try {
            while (frames_.next(f)) {
                if (f.header.type == detail::MsgType::heartbeat) heartbeat();
                if (f.header.type == detail::MsgType::preempt)
                    return detail::decode_preempt(f.payload);
            }
        } catch (const std::exception&) {
        }
        return std::nullopt;
    }

private:
    template <class T>
    void send_value(detail::MsgType type, std::uint64_t id, const T& v) {
        detail::Buffer p;
        detail::save_to(p, v);
        send_raw(type, id, p.span());
    }
    void send_raw(detail::MsgType type, std::uint64_t id, std::span<const std::byte> payload) {
        detail::Buffer out;
        detail::append_frame(out, type, id, payload);
        std::span<const std::byte> one[] = {out.span()};
        t_.write_all(one);
    }

    detail::FdTransport& t_;
    detail::FrameReader frames_;
    int node_;
    int attempt_;
    detail::CallPlugin plugin_;
    detail::Buffer last_args_;
};

/// What a script plays on one connection; when it returns, its end stays open until the client
/// closes (unless it closed it).
using WorkerScript = std::function<void(FakeWorker&)>;

/// The backend. Scripts are queued per node: connect() (the first start and each replacement)
/// takes the next of `connect_scripts`, reconnect() the next of `reconnect_scripts`; a node with
/// none left is refused the way a dead machine is (an error from connect, WorkerGone from
/// reconnect).
class FakeBackend final : public detail::Backend {
public:
    /// Per node: what it may do and what it says about its end.
    struct NodeRules {
        bool can_restart = false;
        bool can_reconnect = false;
        detail::NodeExit exit{NodeLostError::Reason::unreachable,
                              "the fake machine's worker is gone", std::nullopt};
    };

    FakeBackend() = default;
    ~FakeBackend() override { stop_all(); }
    FakeBackend(const FakeBackend&) = delete;
    FakeBackend& operator=(const FakeBackend&) = delete;

    // Set up by the test before the pool starts, and read after (guarded).
    void on_connect(int node, WorkerScript s) {
        std::lock_guard lk(m_);
        nodes_[node].connects.push_back(std::move(s));
    }
    void on_reconnect(int node, WorkerScript s) {
        std::lock_guard lk(m_);
        nodes_[node].reconnects.push_back(std::move(s));
    }
    void rules(int node, NodeRules r) {
        std::lock_guard lk(m_);
        nodes_[node].rules = std::move(r);
    }
    /// Connections made to node `node` so far: connect() and reconnect() calls.
    [[nodiscard]] int connects(int node) const {
        std::lock_guard lk(m_);
        auto it = nodes_.find(node);
        return it == nodes_.end() ? 0 : it->second.connected;
    }
    [[nodiscard]] int reconnects(int node) const {
        std::lock_guard lk(m_);
        auto it = nodes_.find(node);
        return it == nodes_.end() ? 0 : it->second.reconnected;
    }
    /// Nodes added (add()) and released (release()), in order.
    [[nodiscard]] std::vector<int> added() const {
        std::lock_guard lk(m_);
        return added_;
    }
    [[nodiscard]] std::vector<int> released() const {
        std::lock_guard lk(m_);
        return released_;
    }
    [[nodiscard]] bool stopped() const {
        std::lock_guard lk(m_);
        return stopped_;
    }

    // Backend.
    void provision(int nodes, const std::function<void(Event)>& emit) override {
        emit(InstanceLaunching{nodes, "fake", "fake"});
        std::lock_guard lk(m_);
        for (int i = 0; i < nodes; ++i) nodes_[i].present = true;
    }
    void add(const std::vector<int>& nodes, const std::function<void(Event)>& emit) override {
        emit(InstanceLaunching{static_cast<int>(nodes.size()), "fake", "fake"});
        std::lock_guard lk(m_);
        for (int i : nodes) {
            nodes_[i].present = true;
            added_.push_back(i);
        }
    }
    void release(int node) override {
        std::lock_guard lk(m_);
        nodes_[node].present = false;
        released_.push_back(node);
    }
    detail::NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        WorkerScript script;
        int attempt = 0;
        {
            std::lock_guard lk(m_);
            auto& n = nodes_[node];
            if (!n.present) throw Error("fake backend: node " + std::to_string(node) + " is gone");
            attempt = n.connected + n.reconnected;
            ++n.connected;
            if (n.connects.empty())
                throw Error("fake backend: node " + std::to_string(node) + " has no machine left");
            script = std::move(n.connects.front());
            n.connects.pop_front();
        }
        detail::NodeStart s;
        s.instance.id = "fake-" + std::to_string(node) + "-" + std::to_string(attempt);
        s.instance.node = node;
        s.instance.provider = "fake";
        s.instance.instance_type = "fake";
        s.instance.private_ip = "127.0.0.1";
        s.token = token;
        {
            std::lock_guard lk(m_);
            emit_ = emit;
        }
        emit(InstanceProvisioned{s.instance.id, node, false, "fake", std::string("127.0.0.1"),
                                 std::string("fake"), 0.0, std::nullopt});
        s.stream = play(node, attempt, std::move(script));
        return s;
    }
    detail::NodeExit exit_reason(int node) override {
        std::lock_guard lk(m_);
        return nodes_[node].rules.exit;
    }
    [[nodiscard]] bool can_reconnect(int node) const override {
        std::lock_guard lk(m_);
        auto it = nodes_.find(node);
        return it != nodes_.end() && it->second.rules.can_reconnect;
    }
    std::unique_ptr<detail::io::Stream> reconnect(int node, std::chrono::milliseconds) override {
        WorkerScript script;
        int attempt = 0;
        {
            std::lock_guard lk(m_);
            auto& n = nodes_[node];
            attempt = n.connected + n.reconnected;
            ++n.reconnected;
            if (n.reconnects.empty()) throw detail::WorkerGone("fake backend: no worker listens");
            script = std::move(n.reconnects.front());
            n.reconnects.pop_front();
        }
        return play(node, attempt, std::move(script));
    }
    [[nodiscard]] bool can_restart(int node) const override {
        std::lock_guard lk(m_);
        auto it = nodes_.find(node);
        return it != nodes_.end() && it->second.rules.can_restart;
    }
    void stop_all() noexcept override {
        std::vector<std::thread> threads;
        {
            std::lock_guard lk(m_);
            stopped_ = true;
            for (int fd : worker_fds_) ::shutdown(fd, SHUT_RDWR);
            threads.swap(threads_);
        }
        for (auto& t : threads)
            if (t.joinable()) t.join();
        std::lock_guard lk(m_);
        for (int fd : worker_fds_) ::close(fd);
        worker_fds_.clear();
    }

    /// A notice the provider learned of on the client side, through the backend -> pool entry
    /// (detail::notify_preemption) on the last emit connect() was given.
    void client_notice(int node, std::string instance_id,
                       std::chrono::system_clock::time_point deadline, std::string reason) {
        std::function<void(Event)> emit;
        {
            std::lock_guard lk(m_);
            emit = emit_;
        }
        if (!emit) throw Error("fake backend: no node connected yet");
        detail::notify_preemption(emit, node, std::move(instance_id), deadline, std::move(reason));
    }

    /// The token every fake worker expects (32 characters).
    static constexpr const char* token = "a fake worker's token, 32 chars!";

private:
    struct Node {
        bool present = false;
        NodeRules rules;
        std::deque<WorkerScript> connects, reconnects;
        int connected = 0, reconnected = 0;
    };

    std::function<void(Event)> emit_;  // the last connect()'s (guarded)

    std::unique_ptr<detail::io::Stream> play(int node, int attempt, WorkerScript script) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            throw Error("fake backend: socketpair failed");
        auto client =
            std::make_unique<detail::io::FdStream>(sv[0], "fake node " + std::to_string(node));
        // The backend keeps the worker's end open until stop_all (which shuts it down to end a
        // script that still reads, then closes it): its number is never reused meanwhile. The
        // script's transport works on a duplicate.
        const int mine = ::dup(sv[1]);
        std::lock_guard lk(m_);
        worker_fds_.push_back(sv[1]);
        threads_.emplace_back([mine, node, attempt, script = std::move(script)] {
            using namespace std::chrono_literals;
            // The real authentication on the worker's end.
            const int fd =
                detail::worker_authenticate(-1, mine, token, std::chrono::steady_clock::now() + 10s,
                                            10s, [](const std::string&) {});
            if (fd < 0) return;  // it closed the descriptor
            detail::FdTransport t(fd, "fake worker");
            FakeWorker w(t, node, attempt);
            try {
                script(w);
                // Until the client closes: the client, not the script's end, ends the stream.
                while (w.next_call()) {
                }
            } catch (const std::exception&) {
            }
        });
        return client;
    }

    mutable std::mutex m_;
    std::map<int, Node> nodes_;
    std::vector<int> added_, released_;
    std::vector<int> worker_fds_;  ///< the worker ends, open until stop_all
    std::vector<std::thread> threads_;
    bool stopped_ = false;
};

}  // namespace sky::test
