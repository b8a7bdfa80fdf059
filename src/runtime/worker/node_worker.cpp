#include "runtime/worker/node_worker.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "runtime/fd_transport.hpp"
#include "runtime/preemption.hpp"
#include "runtime/rendezvous.hpp"
#include "runtime/spawner.hpp"
#include "runtime/worker.hpp"
#include "runtime/worker/crash_handler.hpp"
#include "runtime/worker/executor.hpp"
#include "runtime/worker_context.hpp"
#include "runtime/worker_launch.hpp"
#include "sky/accelerator.hpp"
#include "sky/errors.hpp"
#include "util/file.hpp"
#include "util/random.hpp"

extern char** environ;

namespace sky::detail {

bool NodeWorker::plan_and_start(const ClientHello& ch, std::uint64_t max_frame,
                                WorkerReady& ready) {
    auto& info = worker_instance();
    std::optional<Accelerator> requested;
    if (!ch.accelerator.empty()) {
        try {
            requested = Accelerator::parse(ch.accelerator);
        } catch (const std::exception& e) {
            core_.say(
                fmt::format("ignoring the pool's accelerator '{}': {}", ch.accelerator, e.what()));
        }
    }
    if (ch.worker >= 0) {
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
        core_.say(e.what());
        return false;
    }
    if (plan.workers == 1) {
        // One worker: pinned to its device unless the pool's environment already chose one.
        if (!plan.devices.empty() && !std::getenv("CUDA_VISIBLE_DEVICES"))
            ::setenv("CUDA_VISIBLE_DEVICES", plan.devices.front().c_str(), 1);
        return true;
    }
    return start_children(ch, plan, ready.accelerator, max_frame);
}

bool NodeWorker::start_children(const ClientHello& ch, const WorkerPlan& plan,
                                const std::string& accelerator, std::uint64_t max_frame) {
    for (int k = 0; k < plan.workers; ++k) {
        auto c = std::make_unique<ChildWorker>();
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
            for (auto& v : WorkerLaunch{.fd = 3,
                           .token = token,
                           .crash_file = child_crash_file(k),
                           .parent_pid = ::getpid()}
                               .env())
                req.env.push_back(std::move(v));
            req.env.push_back("CUDA_VISIBLE_DEVICES=" + plan.devices[static_cast<std::size_t>(k)]);
            req.child_fd = sv[1];
            req.output_fd = core_.err_fd;  // its own messages go where this worker's go
            try {
                c->pid = spawn_process(req);
            } catch (...) {
                ::close(sv[0]);
                ::close(sv[1]);
                throw;
            }
            ::close(sv[1]);
            const std::string name = fmt::format("worker process {} (pid {})", k, c->pid);
            c->channel =
                std::make_unique<ClientChannel>(std::make_unique<FdTransport>(sv[0], name), name);
            children_.push_back(std::move(c));
            ChildWorker& child = *children_.back();
            ClientChannel::Handshake h;
            h.token = token;
            h.hello_bound = std::chrono::seconds(60);
            h.ready_bound = std::chrono::seconds(60);
            h.max_frame = max_frame;
            h.on_log = [this](LogMsg m) {
                Buffer out;
                append_log_frame(out, 0, m.stream, m.timestamp, m.line);
                out_.frame(std::move(out), true);
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
            core_.say(
                fmt::format("cannot start worker process {} of {}: {}", k, plan.workers, e.what()));
            stop();
            return false;
        }
    }
    return true;
}

void NodeWorker::start_relays() {
    for (auto& c : children_) c->thread = std::thread([this, p = c.get()] { relay_loop(p); });
}

void NodeWorker::send_to(ChildWorker& c, MsgType type, std::uint64_t id, std::uint16_t flags,
                         std::span<const std::byte> payload) {
    std::lock_guard lk(c.write_m);
    c.channel->write_frame(type, payload, id, flags);
}

void NodeWorker::send_all(MsgType type, std::span<const std::byte> payload) {
    for (auto& c : children_) {
        try {
            send_to(*c, type, 0, 0, payload);
        } catch (...) {
            // Its relay sees the broken connection and ends this worker.
        }
    }
}

void NodeWorker::forward(const Frame& f) {
    Buffer out;
    append_frame(out, f.header.type, f.header.call_id, f.payload);
    out_.frame(std::move(out), true);
}

// Relays one worker process's frames to the client; its end ends this worker too (the node is
// then lost and replaced as a whole, as when a single worker crashes).
void NodeWorker::relay_loop(ChildWorker* c) {
    Frame f;
    std::string why = "closed its connection";
    try {
        while (c->channel->next_frame(f)) {
            switch (f.header.type) {
                case MsgType::result:
                case MsgType::error: {
                    core_.running.fetch_sub(1);
                    core_.last_heard.store(steady_seconds());
                    // Forgotten once the answer is in the outbox: a duplicate of the call
                    // meanwhile is not relayed again.
                    forward(f);
                    std::lock_guard lk(m_);
                    if (routed_.erase(f.header.call_id)) --c->load;
                    if (keep_answered_) answered_.insert(f.header.call_id);
                    break;
                }
                case MsgType::started: {
                    std::lock_guard lk(m_);
                    if (auto it = routed_.find(f.header.call_id); it != routed_.end())
                        it->second.started = true;
                }
                    forward(f);
                    break;
                case MsgType::log:
                    forward(f);
                    break;
                case MsgType::progress:
                    // This worker sends the highest of its worker processes' steps.
                    try {
                        if (auto step = decode_progress(f.payload)) relay_progress(*step);
                    } catch (const std::exception& e) {
                        core_.say(fmt::format("worker process {}: {}", c->index, e.what()));
                    }
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
        why = fmt::format("was killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st))
        why = fmt::format("exited with status {}", WEXITSTATUS(st));
    core_.say(fmt::format("worker process {} (pid {}) {}; ending this node's worker", c->index,
                          c->pid, why));
    // Its crash report becomes this worker's: the client reads one file per node.
    if (!crash_file_.empty()) {
        crash_report_append(read_file(child_crash_file(c->index)).value_or(""));
    }
    ::_exit(6);
}

std::string NodeWorker::child_crash_file(int k) const {
    return crash_file_.empty() ? std::string() : fmt::format("{}.{}", crash_file_, k);
}

void NodeWorker::keep_answered(bool on) {
    std::lock_guard lk(m_);
    keep_answered_ = on;
}

void NodeWorker::forget(std::span<const std::uint64_t> call_ids) {
    std::lock_guard lk(m_);
    for (auto id : call_ids) answered_.erase(id);
}

bool NodeWorker::relay_call(Frame& f) {
    const std::uint64_t id = f.header.call_id;
    {
        std::lock_guard lk(m_);
        if (routed_.count(id) || answered_.count(id)) return false;
    }
    CallPlugin plugin;
    try {
        decode_call_plugin(f.payload, f.header.flags, plugin);
    } catch (const std::exception& e) {
        out_.frame(error_frame(id, {ErrorMsg::bad_arguments, "sky::ProtocolError", e.what(), {}}),
                   true);
        return true;
    }
    const int n = static_cast<int>(children_.size());
    if (plugin.worker >= n) {
        out_.frame(error_frame(id, {ErrorMsg::exception,
                                    "sky::Error",
                                    fmt::format("worker process {} does not exist on this "
                                                "node ({} run here)",
                                                plugin.worker, n),
                                    {}}),
                   true);
        return true;
    }
    ChildWorker* target = nullptr;
    {
        std::lock_guard lk(m_);
        if (plugin.worker >= 0) {
            target = children_[static_cast<std::size_t>(plugin.worker)].get();
        } else {
            // The least busy worker process; the first of equals.
            for (auto& c : children_)
                if (!target || c->load < target->load) target = c.get();
        }
        routed_[id] = {target->index, false};
        ++target->load;
    }
    core_.running.fetch_add(1);
    try {
        send_to(*target, MsgType::call, id, f.header.flags, f.payload);
    } catch (...) {
        // Its reader sees the broken connection and ends this worker.
    }
    return true;
}

std::vector<std::uint64_t> NodeWorker::started() const {
    std::lock_guard lk(m_);
    std::vector<std::uint64_t> ids;
    for (auto& [id, r] : routed_)
        if (r.started) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

void NodeWorker::relay_control(MsgType type, std::uint64_t id) {
    ChildWorker* target = nullptr;
    {
        std::lock_guard lk(m_);
        auto it = routed_.find(id);
        if (it == routed_.end()) return;
        target = children_[static_cast<std::size_t>(it->second.child)].get();
    }
    try {
        send_to(*target, type, id, 0, {});
    } catch (...) {
    }
}

void NodeWorker::stop() {
    stopping_.store(true);
    for (auto& c : children_) {
        if (!c->channel) continue;
        try {
            send_to(*c, MsgType::shutdown, 0, 0, {});
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

}  // namespace sky::detail
