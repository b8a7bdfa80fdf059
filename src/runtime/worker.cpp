#include "runtime/worker.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/auth.hpp"
#include "runtime/capture.hpp"
#include "runtime/client_channel.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "runtime/rendezvous.hpp"
#include "runtime/spawner.hpp"
#include "runtime/worker_context.hpp"
#include "runtime/worker_launch.hpp"
#include "ship/file_server.hpp"
#include "sky/accelerator.hpp"
#include "sky/detail/registry.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"
#include "sky/init.hpp"
#include "util/text.hpp"

extern char** environ;

namespace sky::detail {

namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_is_worker{false};

/// Frames out of the worker; one lock, small frames batched until flush().
class Writer {
public:
    explicit Writer(Transport& t) : t_(t) {}
    void append(MsgType type, std::uint64_t id, std::span<const std::byte> payload) {
        std::lock_guard lk(m_);
        append_frame(buf_, type, id, payload);
    }
    void log(std::uint64_t id, std::uint8_t stream, std::string_view line) {
        std::lock_guard lk(m_);
        append_log_frame(buf_, id, stream, unix_now(), line);
        flush_locked();
    }
    /// A finished frame (header at the front); large ones are written without a copy.
    void frame(Buffer&& f, bool flush_now) {
        std::lock_guard lk(m_);
        if (f.size() > (256u << 10)) {
            flush_locked();
            std::span<const std::byte> one[] = {f.span()};
            t_.write_all(one);
            return;
        }
        buf_.append(f.data(), f.size());
        if (flush_now) flush_locked();
    }
    void flush() {
        std::lock_guard lk(m_);
        flush_locked();
    }

private:
    void flush_locked() {
        if (buf_.empty()) return;
        std::span<const std::byte> one[] = {buf_.span()};
        t_.write_all(one);
        buf_.clear();
    }
    Transport& t_;
    std::mutex m_;
    Buffer buf_;
};

struct Job {
    std::uint64_t id;
    Buffer payload;
    std::uint16_t flags = 0;
};

/// A worker process this node's worker started (one per GPU or MIG slice when there are
/// several): calls are relayed to it, its frames relayed back to the client.
struct Child {
    int index = 0;
    int pid = -1;
    /// This worker is the client of its worker processes: the same channel as the pool's.
    std::unique_ptr<ClientChannel> channel;
    std::mutex write_m;
    std::thread thread;
    int load = 0;  // calls relayed and not answered; under Worker::m_
};

class Worker {
public:
    // The connection is already authenticated (worker_authenticate): the worker needs no token.
    Worker(FdTransport& t, const WorkerLaunch& launch)
        : t_(t),
          writer_(t),
          parent_pid_(launch.parent_pid),
          heartbeat_file_(launch.heartbeat_file) {}
    ~Worker() { stop_background(); }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    int run() {
        // The hello goes out before output capture starts, so no log frame can come first.
        if (!send_hello()) return 3;
        capture_ = std::make_unique<OutputCapture>(
            [this](std::uint64_t id, std::uint8_t s, std::string_view line) {
                try {
                    writer_.log(id, s, line);
                } catch (...) {
                }
            });
        err_fd_ = capture_->original_stderr();
        if (!handshake()) return 3;
        // Joined by finish(): they read this object, which ends when run() returns (a detached
        // thread went on using its mutexes as the process exited; TSan saw it).
        watchdog_ = std::thread([this] { watchdog(); });
        if (collect_metrics_) metrics_ = std::thread([this] { metrics_loop(); });
        for (auto& c : children_) c->thread = std::thread([this, p = c.get()] { child_loop(p); });
        // Calls run on executor threads, never on the reading thread: the connection is read
        // all the time, so heartbeats, cancels and a vanished client are seen while calls run.
        if (children_.empty())
            for (int i = 0; i < std::max(1, concurrency_); ++i)
                executors_.emplace_back([this, i] { executor(i); });
        int code = serve();
        if (running_.load() > 0) {
            // Nobody can receive these results: a rented node must not run on for them.
            say(fmt::format("the client connection ended while {} call(s) ran; exiting",
                            running_.load()));
            stop_children();
            ::_exit(code);
        }
        finish();
        return code;
    }

private:
    void say(const std::string& msg) {
        std::string line =
            fmt::format("sky worker {} (node {}): {}\n", ::getpid(), worker_instance().node, msg);
        (void)!::write(err_fd_, line.data(), line.size());
    }

    bool send_hello() {
        WorkerHello wh;
        wh.build_id = self_build_id();
        wh.pid = ::getpid();
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        wh.hostname = host;
        for (auto& e : all_functions()) wh.functions.emplace_back(std::string(e.name), e.signature);
        Buffer payload;
        save_to(payload, wh);
        try {
            writer_.append(MsgType::hello, 0, payload.span());
            writer_.flush();
        } catch (const std::exception& e) {
            say(fmt::format("cannot send the hello: {}", e.what()));
            return false;
        }
        return true;
    }

    bool handshake() {
        if (!t_.wait_readable(std::chrono::seconds(60))) {
            say("no hello from the client within 60 s");
            return false;
        }
        reader_ = std::make_unique<FrameReader>(t_, 1 << 20);
        auto& reader = *reader_;
        Frame f;
        ClientHello ch;
        // Whatever the client sends, a bad hello ends this connection with a message, never an
        // exception out of sky::init (std::terminate) or an allocation its sizes ask for.
        try {
            if (!reader.next(f) || f.header.type != MsgType::hello) {
                say("the first frame from the client was not a hello");
                return false;
            }
            load_from(f.payload, ch);
        } catch (const std::exception& e) {
            say(fmt::format("unreadable hello from the client, closing: {}", e.what()));
            return false;
        }
        if (ch.protocol != protocol_version) {
            say(fmt::format("the client speaks protocol {}, this worker {}; closing", ch.protocol,
                            protocol_version));
            return false;
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
        }
        concurrency_ = std::max(1, ch.concurrency);
        idle_timeout_ = std::chrono::seconds(std::max<std::int64_t>(1, ch.idle_timeout_s));
        hard_timeout_ = std::chrono::seconds(std::max<std::int64_t>(1, ch.hard_timeout_s));
        max_frame_ = ch.max_frame;
        collect_metrics_ = ch.collect_metrics;
        metrics_interval_ =
            std::chrono::milliseconds(std::max<std::int64_t>(100, ch.metrics_interval_ms));
        WorkerReady ready;
        if (!plan_workers_and_start(ch, ready)) return false;
        // The interface that carries this node's private address, for GLOO/NCCL_SOCKET_IFNAME.
        interface_ = interface_for_address(info.private_addr);
        try {
            Buffer p;
            save_to(p, ready);
            writer_.append(MsgType::ready, 0, p.span());
            writer_.flush();
        } catch (const std::exception& e) {
            say(fmt::format("cannot send the ready frame: {}", e.what()));
            return false;
        }
        in_worker.store(true, std::memory_order_release);
        // Calls may follow the hello in the same read: the same reader serves them.
        reader_ = std::make_unique<FrameReader>(std::move(*reader_), max_frame_);
        return true;
    }

    int serve() {
        FrameReader& reader = *reader_;
        Frame f;
        for (;;) {
            try {
                // Never wait for the client with output unsent: a result held back because
                // another frame was buffered (a layout, a cancel) would wait for the next write.
                if (!reader.has_buffered_frame()) writer_.flush();
                if (!reader.next(f)) return 0;  // the client went away
            } catch (const std::exception& e) {
                say(fmt::format("closing the connection: {}", e.what()));
                return 4;
            }
            last_heard_.store(now_s());
            touch_heartbeat();
            switch (f.header.type) {
                case MsgType::call:
                    if (!children_.empty()) {
                        relay_call(f);
                    } else {
                        std::lock_guard lk(m_);
                        queue_.push_back({f.header.call_id, f.take_payload(), f.header.flags});
                        cv_.notify_one();
                    }
                    break;
                case MsgType::cancel:
                    if (!children_.empty())
                        relay_cancel(f.header.call_id);
                    else
                        cancel(f.header.call_id);
                    break;
                case MsgType::layout:
                    apply_layout(f.payload);
                    for (auto& c : children_) send_to_child(*c, MsgType::layout, 0, 0, f.payload);
                    break;
                case MsgType::heartbeat:
                    try {
                        writer_.append(MsgType::heartbeat, 0, {});
                        writer_.flush();
                    } catch (const std::exception& e) {
                        say(fmt::format("the client connection broke: {}", e.what()));
                        return 4;
                    }
                    break;
                case MsgType::shutdown:
                    return 0;
                default:
                    say(fmt::format("ignoring an unexpected {} frame",
                                    msg_type_name(f.header.type)));
            }
        }
    }

    // For the node's watchdog (a separate process): the file's mtime is when the client was
    // last heard from. Touched at most once a second.
    void touch_heartbeat() {
        if (heartbeat_file_.empty()) return;
        double now = now_s();
        if (now - last_touch_ < 1.0) return;
        last_touch_ = now;
        ::utimensat(AT_FDCWD, heartbeat_file_.c_str(), nullptr, 0);
    }

    void executor(int slot) {
        worker_slot = slot;
        for (;;) {
            Job j;
            {
                std::unique_lock lk(m_);
                cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
                if (stop_ && queue_.empty()) return;
                j = std::move(queue_.front());
                queue_.pop_front();
            }
            Buffer out = execute(j.id, j.payload.span(), j.flags);
            try {
                writer_.frame(std::move(out), true);
            } catch (...) {
                return;
            }
        }
    }

    void cancel(std::uint64_t id) {
        bool found = false;
        {
            std::lock_guard lk(m_);
            for (auto it = queue_.begin(); it != queue_.end(); ++it)
                if (it->id == id) {
                    queue_.erase(it);
                    found = true;
                    break;
                }
        }
        if (found) {
            ErrorMsg e{
                ErrorMsg::cancelled, "sky::CancelledError", "cancelled before it started", {}};
            Buffer p;
            save_to(p, e);
            writer_.append(MsgType::error, id, p.span());
            writer_.flush();
        }
    }

    static Buffer error_frame(std::uint64_t id, const ErrorMsg& e) {
        Buffer p;
        save_to(p, e);
        Buffer out;
        append_frame(out, MsgType::error, id, p.span());
        return out;
    }

    Buffer execute(std::uint64_t id, std::span<const std::byte> payload, std::uint16_t flags) {
        CallHeader c;
        CallPlugin plugin;
        try {
            c = decode_call(decode_call_plugin(payload, flags, plugin));
        } catch (const std::exception& e) {
            return error_frame(id, {ErrorMsg::bad_arguments, "sky::ProtocolError", e.what(), {}});
        }
        Lookup l = find_function(c.function, c.signature);
        if (!l.entry) {
            if (l.name_known)
                return error_frame(id, {ErrorMsg::signature_mismatch,
                                        "sky::RemoteError",
                                        fmt::format("function '{}' exists on this worker with "
                                                    "another signature (the client and the worker "
                                                    "were built from different sources)",
                                                    c.function),
                                        {}});
            return error_frame(id, {ErrorMsg::unknown_function,
                                    "sky::RemoteError",
                                    fmt::format("no function named '{}' is registered on this "
                                                "worker (is it used with sky::compute in this "
                                                "program?)",
                                                c.function),
                                    {}});
        }
        // A distributed call: its framework's rendezvous variables exist while it runs, and only
        // then (rendezvous.hpp: ScopedEnv says what concurrent calls in one process share).
        std::optional<ScopedEnv> env;
        if (plugin.kind != PluginSpec::none) {
            try {
                env.emplace(plugin_env(plugin));
            } catch (const std::exception& e) {
                return error_frame(id, {ErrorMsg::exception, "sky::Error", e.what(), {}});
            }
        }
        CallContext ctx;
        ctx.call_id = id;
        running_.fetch_add(1);
        capture_->enter(&ctx);
        Buffer out;
        out.resize(frame_header_size);
        ErrorMsg err;
        bool ok = false;
        try {
            l.entry->invoke(c.args, out);
            ok = true;
        } catch (const std::exception& e) {
            err = {ErrorMsg::exception, demangle(typeid(e).name()), e.what(), {}};
        } catch (...) {
            auto* t = abi::__cxa_current_exception_type();
            err = {ErrorMsg::exception,
                   t ? demangle(t->name()) : "unknown",
                   "an exception that is not a std::exception",
                   {}};
        }
        capture_->leave();
        env.reset();
        running_.fetch_sub(1);
        if (ok) {
            encode_header(out.data(), MsgType::result, id, out.size() - frame_header_size);
            return out;
        }
        {
            std::lock_guard lk(ctx.m);
            err.log_tail.assign(ctx.tail.begin(), ctx.tail.end());
        }
        return error_frame(id, err);
    }

    static double now_s() {
        using namespace std::chrono;
        return duration<double>(steady_clock::now().time_since_epoch()).count();
    }

    /// Sleeps for `d` unless the background threads are told to stop; true when they are.
    bool background_stopped_within(std::chrono::milliseconds d) {
        std::unique_lock lk(background_m_);
        return background_cv_.wait_for(lk, d, [this] { return background_stop_; });
    }

    void stop_background() {
        {
            std::lock_guard lk(background_m_);
            background_stop_ = true;
        }
        background_cv_.notify_all();
        if (watchdog_.joinable()) watchdog_.join();
        if (metrics_.joinable()) metrics_.join();
    }

    // Independent of the call loop: ends the worker when its client is gone or its time is up,
    // even while a call runs.
    void watchdog() {
        const double start = now_s();
        for (;;) {
            if (background_stopped_within(std::chrono::milliseconds(250))) return;
            if (parent_pid_ > 0 && ::getppid() != parent_pid_) {
                say("the client process is gone; exiting");
                ::_exit(0);
            }
            double now = now_s();
            if (now - start > static_cast<double>(hard_timeout_.count())) {
                say(fmt::format("hard timeout of {} s reached; exiting", hard_timeout_.count()));
                ::_exit(0);
            }
            // Running calls do not count as contact: the client heartbeats all through them, so
            // silence means it is gone (killed, cut off), and nobody waits for their results.
            if (now - last_heard_.load() > static_cast<double>(idle_timeout_.count())) {
                say(fmt::format("no word from the client for {} s (idle timeout){}; exiting",
                                idle_timeout_.count(),
                                running_.load() > 0 ? ", calls abandoned" : ""));
                ::_exit(0);
            }
        }
    }

    // Samples CPU, memory and (with nvidia-smi) GPUs every interval and sends them.
    void metrics_loop() {
        MetricsSampler sampler;
        for (;;) {
            if (background_stopped_within(metrics_interval_)) return;
            MetricsSample s = sampler.sample();
            Buffer p;
            save_to(p, s);
            try {
                writer_.append(MsgType::metrics, 0, p.span());
                writer_.flush();
            } catch (...) {
                return;
            }
        }
    }

    void finish() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
            queue_.clear();
        }
        cv_.notify_all();
        for (auto& t : executors_) t.join();
        stop_children();
        stop_background();
        try {
            writer_.flush();
        } catch (...) {
        }
    }

    // ---- Worker processes per GPU / MIG slice, and the rendezvous of distributed calls ----

    /// Decides W (nvidia-smi where needed), exports the accelerator, picks the ports and starts
    /// the worker processes when W > 1. For a worker process a node's worker started, takes
    /// what that worker says.
    bool plan_workers_and_start(const ClientHello& ch, WorkerReady& ready) {
        auto& info = worker_instance();
        std::optional<Accelerator> requested;
        if (!ch.accelerator.empty()) {
            try {
                requested = Accelerator::parse(ch.accelerator);
            } catch (const std::exception& e) {
                say(fmt::format("ignoring the pool's accelerator '{}': {}", ch.accelerator,
                                e.what()));
            }
        }
        if (ch.worker >= 0) {
            is_child_ = true;
            std::lock_guard lk(worker_instance_mutex());
            info.worker = ch.worker;
            info.workers_per_node = std::max(1, ch.workers);
            if (requested) ::setenv("SKY_ACCELERATOR", ch.accelerator.c_str(), 1);
            ready.workers = 1;
            // Its port was picked by the node's worker, which reports the node's ports; the
            // entry keeps the frame as strict as any other ready frame (one port per process).
            ready.ports = {0};
            return true;
        }
        const WorkerPlan plan = detect_worker_plan(requested);
        ready.workers = plan.workers;
        ready.devices = plan.devices;
        if (plan.accelerator) {
            // Lossless: Accelerator::parse(to_string()) gives back count, memory and MIG.
            ready.accelerator = plan.accelerator->to_string();
            ::setenv("SKY_ACCELERATOR", ready.accelerator.c_str(), 1);
        }
        {
            std::lock_guard lk(worker_instance_mutex());
            info.worker = 0;
            info.workers_per_node = plan.workers;
            if (info.accelerators.empty() && plan.accelerator)
                info.accelerators.assign(static_cast<std::size_t>(plan.accelerator->count),
                                         plan.accelerator->name);
        }
        try {
            ready.ports = pick_free_ports(plan.workers);
        } catch (const std::exception& e) {
            say(e.what());
            return false;
        }
        if (plan.workers == 1) {
            // One worker: pinned to its device unless the pool's environment already chose one.
            if (!plan.devices.empty() && !std::getenv("CUDA_VISIBLE_DEVICES"))
                ::setenv("CUDA_VISIBLE_DEVICES", plan.devices.front().c_str(), 1);
            return true;
        }
        return start_children(ch, plan, ready.accelerator);
    }

    // Separate processes, not threads: CUDA reads CUDA_VISIBLE_DEVICES once, when it
    // initialises, so each GPU's worker needs an environment of its own from the start.
    bool start_children(const ClientHello& ch, const WorkerPlan& plan,
                        const std::string& accelerator) {
        for (int k = 0; k < plan.workers; ++k) {
            auto c = std::make_unique<Child>();
            c->index = k;
            try {
                int sv[2];
                if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
                    throw Error(fmt::format("socketpair: {}", std::strerror(errno)));
                const std::string token = random_hex(32);
                SpawnRequest req;
                req.path = "/proc/self/exe";
                req.argv = {program_name(), worker_flag};
                for (char** e = environ; e && *e; ++e) {
                    const std::string_view entry(*e);
                    if (WorkerLaunch::is_launch_variable(entry) ||
                        entry.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0)
                        continue;
                    req.env.emplace_back(entry);
                }
                for (auto& v :
                     WorkerLaunch{.fd = 3, .token = token, .parent_pid = ::getpid()}.env())
                    req.env.push_back(std::move(v));
                req.env.push_back("CUDA_VISIBLE_DEVICES=" +
                                  plan.devices[static_cast<std::size_t>(k)]);
                req.child_fd = sv[1];
                req.output_fd = err_fd_;  // its own messages go where this worker's go
                try {
                    c->pid = spawn_process(req);
                } catch (...) {
                    ::close(sv[0]);
                    ::close(sv[1]);
                    throw;
                }
                ::close(sv[1]);
                const std::string name = fmt::format("worker process {} (pid {})", k, c->pid);
                c->channel = std::make_unique<ClientChannel>(
                    std::make_unique<FdTransport>(sv[0], name), name);
                children_.push_back(std::move(c));
                Child& child = *children_.back();
                ClientChannel::Handshake h;
                h.token = token;
                h.hello_bound = std::chrono::seconds(60);
                h.ready_bound = std::chrono::seconds(60);
                h.max_frame = max_frame_;
                h.on_log = [this](LogMsg m) {
                    Buffer out;
                    append_log_frame(out, 0, m.stream, m.timestamp, m.line);
                    writer_.frame(std::move(out), true);
                };
                ClientHello& sub = h.hello;
                sub = ch;
                sub.worker = k;
                sub.workers = plan.workers;
                sub.accelerator = accelerator;
                {
                    std::lock_guard lk(worker_instance_mutex());
                    sub.accelerators = worker_instance().accelerators;
                }
                sub.collect_metrics = false;  // this worker samples the whole node
                // It lives as long as this worker (parent-death signal), which keeps the time.
                sub.idle_timeout_s = ch.hard_timeout_s;
                child.channel->handshake(h);
            } catch (const std::exception& e) {
                say(fmt::format("cannot start worker process {} of {}: {}", k, plan.workers,
                                e.what()));
                stop_children();
                return false;
            }
        }
        return true;
    }

    void send_to_child(Child& c, MsgType type, std::uint64_t id, std::uint16_t flags,
                       std::span<const std::byte> payload) {
        std::lock_guard lk(c.write_m);
        c.channel->write_frame(type, payload, id, flags);
    }

    void forward(const Frame& f) {
        Buffer out;
        append_frame(out, f.header.type, f.header.call_id, f.payload);
        writer_.frame(std::move(out), true);
    }

    // Relays one worker process's frames to the client; its end ends this worker too (the
    // node is then lost and replaced as a whole, as when a single worker crashes).
    void child_loop(Child* c) {
        Frame f;
        std::string why = "closed its connection";
        try {
            while (c->channel->next_frame(f)) {
                switch (f.header.type) {
                    case MsgType::result:
                    case MsgType::error: {
                        {
                            std::lock_guard lk(m_);
                            if (routed_.erase(f.header.call_id)) --c->load;
                        }
                        running_.fetch_sub(1);
                        last_heard_.store(now_s());
                        forward(f);
                        break;
                    }
                    case MsgType::log:
                        forward(f);
                        break;
                    default:
                        break;  // heartbeats and the like concern this worker only
                }
            }
        } catch (const std::exception& e) {
            why = e.what();
        }
        if (stopping_.load()) return;
        int st = 0;
        for (int i = 0; i < 40 && ::waitpid(c->pid, &st, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        if (WIFSIGNALED(st))
            why =
                fmt::format("was killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
        else if (WIFEXITED(st))
            why = fmt::format("exited with status {}", WEXITSTATUS(st));
        say(fmt::format("worker process {} (pid {}) {}; ending this node's worker", c->index,
                        c->pid, why));
        ::_exit(6);
    }

    void relay_call(Frame& f) {
        const std::uint64_t id = f.header.call_id;
        CallPlugin plugin;
        try {
            decode_call_plugin(f.payload, f.header.flags, plugin);
        } catch (const std::exception& e) {
            writer_.frame(
                error_frame(id, {ErrorMsg::bad_arguments, "sky::ProtocolError", e.what(), {}}),
                true);
            return;
        }
        const int n = static_cast<int>(children_.size());
        if (plugin.worker >= n) {
            writer_.frame(error_frame(id, {ErrorMsg::exception,
                                           "sky::Error",
                                           fmt::format("worker process {} does not exist on this "
                                                       "node ({} run here)",
                                                       plugin.worker, n),
                                           {}}),
                          true);
            return;
        }
        Child* target = nullptr;
        {
            std::lock_guard lk(m_);
            if (plugin.worker >= 0) {
                target = children_[static_cast<std::size_t>(plugin.worker)].get();
            } else {
                // The least busy worker process; the first of equals.
                for (auto& c : children_)
                    if (!target || c->load < target->load) target = c.get();
            }
            routed_[id] = target->index;
            ++target->load;
        }
        running_.fetch_add(1);
        try {
            send_to_child(*target, MsgType::call, id, f.header.flags, f.payload);
        } catch (...) {
            // Its reader sees the broken connection and ends this worker.
        }
    }

    void relay_cancel(std::uint64_t id) {
        Child* target = nullptr;
        {
            std::lock_guard lk(m_);
            auto it = routed_.find(id);
            if (it == routed_.end()) return;
            target = children_[static_cast<std::size_t>(it->second)].get();
        }
        try {
            send_to_child(*target, MsgType::cancel, id, 0, {});
        } catch (...) {
        }
    }

    void stop_children() {
        stopping_.store(true);
        for (auto& c : children_) {
            if (!c->channel) continue;
            try {
                send_to_child(*c, MsgType::shutdown, 0, 0, {});
            } catch (...) {
            }
        }
        // They finish the call they run (a shutdown waits for it), within a bound.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (auto& c : children_) {
            if (c->pid <= 0) continue;
            int st = 0;
            while (::waitpid(c->pid, &st, WNOHANG) == 0) {
                if (std::chrono::steady_clock::now() > until) {
                    ::kill(c->pid, SIGKILL);
                    ::waitpid(c->pid, &st, 0);
                    break;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            c->pid = -1;
        }
        for (auto& c : children_) {
            if (c->channel) c->channel->shutdown();
            if (c->thread.joinable()) c->thread.join();
        }
        children_.clear();
    }

    void apply_layout(std::span<const std::byte> payload) {
        PoolLayout l;
        try {
            load_from(payload, l);
        } catch (const std::exception& e) {
            say(fmt::format("ignoring an unreadable layout frame: {}", e.what()));
            return;
        }
        {
            std::lock_guard lk(worker_instance_mutex());
            auto& info = worker_instance();
            info.peers = l.peers;
            if (!l.peers.empty()) info.head_addr = l.peers.front();
            if (!l.ports.empty() && !l.ports.front().empty())
                info.head_port = l.ports.front().front();
        }
        std::lock_guard lk(layout_m_);
        layout_ = std::move(l);
    }

    EnvVars plugin_env(const CallPlugin& plugin) {
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

    FdTransport& t_;
    Writer writer_;
    long parent_pid_;
    int err_fd_ = 2;
    int concurrency_ = 1;
    std::chrono::seconds idle_timeout_{600};
    std::chrono::seconds hard_timeout_{3600};
    std::uint64_t max_frame_ = default_max_frame;
    bool collect_metrics_ = false;
    std::chrono::milliseconds metrics_interval_{5000};
    std::unique_ptr<OutputCapture> capture_;
    std::unique_ptr<FrameReader> reader_;
    std::vector<std::thread> executors_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Job> queue_;
    bool stop_ = false;
    std::atomic<int> running_{0};
    std::atomic<double> last_heard_{now_s()};
    std::vector<std::unique_ptr<Child>> children_;
    std::unordered_map<std::uint64_t, int> routed_;  // call id -> worker process; under m_
    std::atomic<bool> stopping_{false};
    /// The watchdog and the metrics sampler: they wait on background_cv_, so finish() ends them
    /// at once.
    std::thread watchdog_;
    std::thread metrics_;
    std::mutex background_m_;
    std::condition_variable background_cv_;
    bool background_stop_ = false;  // under background_m_
    bool is_child_ = false;
    std::mutex layout_m_;
    PoolLayout layout_;
    std::string interface_;
    std::string heartbeat_file_;
    double last_touch_ = 0;
};

}  // namespace

bool initialised() noexcept { return g_initialised.load(); }

namespace {

// The listening socket: "unix:/absolute/path" (0600, in a directory the caller made 0700) or
// "HOST:PORT" (IPv4; remote workers listen on 127.0.0.1 only). What the port file gets: the
// port, or "unix".
struct Listener {
    int fd = -1;
    std::string unix_path;
    std::string port_text;
};

Listener open_listener(const std::string& where) {
    Listener l;
    if (where.rfind("unix:", 0) == 0) {
        const std::string path = where.substr(5);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        if (path.empty() || path[0] != '/' || path.size() >= sizeof a.sun_path) {
            std::fprintf(stderr,
                         "sky worker: listening on unix:PATH needs an absolute path shorter "
                         "than %zu bytes, got '%s'\n",
                         sizeof a.sun_path, path.c_str());
            return l;
        }
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        // The directory is the first gate (others cannot even reach the socket); the handshake
        // is the second. Say so when the first is open.
        const std::string dir = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
        struct stat ds {};
        if (::stat(dir.c_str(), &ds) == 0 && (ds.st_mode & 077) != 0)
            std::fprintf(stderr,
                         "sky worker: warning: %s is accessible to other users (mode %03o); "
                         "the socket relies on the handshake alone\n",
                         dir.c_str(), static_cast<unsigned>(ds.st_mode & 0777));
        // A socket left by an earlier worker in the same (private) directory is replaced;
        // anything else at that path is not ours to remove.
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
        l.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        // The socket file is created 0600 from the start: no moment where others may connect.
        mode_t old = ::umask(077);
        int rc = l.fd < 0 ? -1 : ::bind(l.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::umask(old);
        if (rc != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(l.fd, 16) != 0) {
            std::fprintf(stderr, "sky worker: cannot listen on %s: %s\n", where.c_str(),
                         std::strerror(errno));
            if (rc == 0) ::unlink(path.c_str());
            if (l.fd >= 0) ::close(l.fd);
            l.fd = -1;
            return l;
        }
        l.unix_path = path;
        l.port_text = "unix";
        return l;
    }
    auto colon = where.rfind(':');
    std::string host = colon == std::string::npos ? "127.0.0.1" : where.substr(0, colon);
    int port = colon == std::string::npos ? std::atoi(where.c_str())
                                          : std::atoi(where.c_str() + colon + 1);
    l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(l.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
        ::bind(l.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l.fd, 16) != 0) {
        std::fprintf(stderr, "sky worker: cannot listen on %s: %s\n", where.c_str(),
                     std::strerror(errno));
        ::close(l.fd);
        l.fd = -1;
        return l;
    }
    socklen_t len = sizeof a;
    ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&a), &len);
    l.port_text = std::to_string(ntohs(a.sin_port));
    return l;
}

void note_to_stderr(const std::string& msg) {
    std::fprintf(stderr, "sky worker %d: %s\n", static_cast<int>(::getpid()), msg.c_str());
}

}  // namespace

int listen_and_accept(const std::string& where, const std::string& port_file,
                      std::chrono::seconds timeout, std::string_view token) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    Listener l = open_listener(where);
    if (l.fd < 0) return -1;
    if (!port_file.empty()) {
        // Written whole and renamed: a reader never sees a partial file, and a non-empty file
        // means the worker is listening.
        std::string tmp = port_file + ".tmp";
        if (FILE* f = std::fopen(tmp.c_str(), "w")) {
            std::fprintf(f, "%s\n", l.port_text.c_str());
            std::fclose(f);
            std::rename(tmp.c_str(), port_file.c_str());
        }
    }
    // Accepts until one peer proves it holds the token: a squatter is dropped, not served, and
    // cannot keep the client out. Each peer gets 10 s to answer the challenge.
    int fd = -1;
    try {
        fd = worker_authenticate(l.fd, -1, token, deadline, std::chrono::seconds(10),
                                 note_to_stderr);
    } catch (const std::exception& e) {
        note_to_stderr(e.what());
    }
    if (fd < 0)
        std::fprintf(stderr, "sky worker: no client authenticated within %lld s\n",
                     static_cast<long long>(timeout.count()));
    ::close(l.fd);
    if (!l.unix_path.empty()) ::unlink(l.unix_path.c_str());
    return fd;
}

namespace {
std::string& argv0() {
    static std::string s = "sky-worker";
    return s;
}
}  // namespace
const std::string& program_name() { return argv0(); }

int run_worker(int fd, const WorkerLaunch& launch) {
    g_is_worker = true;
    // Keep freed memory in the heap instead of returning it to the kernel: a worker that
    // receives large arguments over and over then reuses pages instead of faulting in fresh
    // ones (about 5x the cost of copying them). Memory stays at the high-water mark.
    ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    FdTransport t(fd, "client connection");
    Worker w(t, launch);
    return w.run();
}

}  // namespace sky::detail

namespace sky {

bool is_worker() noexcept { return detail::g_is_worker.load(); }

void init(int argc, char** argv) {
    detail::g_initialised = true;
    if (argc > 0 && argv && argv[0]) detail::argv0() = argv[0];
    // sky starts its modes with the flag as the only argument (argv[1]): a flag further on is
    // the program's own argument (perhaps forwarded from someone else), never a mode.
    const char* mode = argc > 1 && argv ? argv[1] : nullptr;
    const bool worker = mode && std::strcmp(mode, detail::worker_flag) == 0;
    // A node serving the program's files to its pool's other nodes (see ship/file_server).
    if (mode && std::strcmp(mode, detail::ship::serve_files_flag) == 0)
        ::_exit(detail::ship::serve_files_main());
    if (!worker) return;
    detail::WorkerLaunch launch;
    try {
        launch = detail::WorkerLaunch::from_env();
        launch.check_complete();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sky worker: %s\n", e.what());
        std::_Exit(2);
    }
    // A local worker dies with its client: parent-death signal, and a check against the race
    // where the parent died before prctl ran.
    if (launch.parent_pid > 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != launch.parent_pid) ::_exit(0);
    }
    // A listening (remote) worker holds its pool's token until a client authenticates: no core
    // file and no ptrace by other processes of the same user can read it out of memory.
    if (!launch.listen.empty()) {
        ::prctl(PR_SET_DUMPABLE, 0);
        rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);
    }
    std::string tok = launch.token;
    OPENSSL_cleanse(launch.token.data(), launch.token.size());
    if (!launch.token_file.empty()) {
        // A remote worker reads its token from a 0600 file (not the command line), then
        // removes it.
        std::string from_file;
        if (FILE* f = std::fopen(launch.token_file.c_str(), "r")) {
            char buf[256] = {};
            if (std::fgets(buf, sizeof buf, f)) from_file = buf;
            std::fclose(f);
            OPENSSL_cleanse(buf, sizeof buf);
            while (!from_file.empty() && (from_file.back() == '\n' || from_file.back() == '\r'))
                from_file.pop_back();
            ::unlink(launch.token_file.c_str());
        }
        if (!from_file.empty()) tok = from_file;
        OPENSSL_cleanse(from_file.data(), from_file.size());
    }
    if (tok.empty()) {
        std::fprintf(stderr, "sky worker: no token: its file was missing, unreadable or empty\n");
        std::_Exit(2);
    }
    // Wipe the value in the environment block too; the function's child processes need neither.
    detail::WorkerLaunch::erase_token_from_env();
    int fd = -1;
    if (launch.fd) {
        // A socketpair from a Local client: the same handshake as over the network, so a bug in
        // it cannot hide behind the provider that runs in the tests.
        try {
            fd = detail::worker_authenticate(
                -1, *launch.fd, tok, std::chrono::steady_clock::now() + std::chrono::seconds(60),
                std::chrono::seconds(60), [](const std::string& m) {
                    std::fprintf(stderr, "sky worker %d: %s\n", static_cast<int>(::getpid()),
                                 m.c_str());
                });
        } catch (const std::exception& e) {
            std::fprintf(stderr, "sky worker: %s\n", e.what());
        }
        if (fd < 0) std::_Exit(3);
    } else {
        fd = detail::listen_and_accept(launch.listen, launch.port_file,
                                       launch.accept_timeout.value_or(std::chrono::seconds(600)),
                                       tok);
        if (fd < 0) std::_Exit(5);
    }
    // Authenticated: the token is not needed any more.
    OPENSSL_cleanse(tok.data(), tok.size());
    int code = detail::run_worker(fd, launch);
    std::fflush(nullptr);
    ::_exit(code);
}

}  // namespace sky
