#include "pool/pool_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "metrics/metrics.hpp"
#include "pool/ledger.hpp"
#include "pool/signals.hpp"
#include "providers/registry/registry.hpp"
#include "runtime/auth.hpp"
#include "runtime/worker.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::detail {

namespace {
// How many calls may wait in a node's pipe beyond its running slots: deep when a large batch
// is queued (throughput), shallow otherwise (so a slow call does not hold others back).
constexpr std::size_t max_pipeline_depth = 64;
constexpr int max_restarts = 3;
}  // namespace

PoolCore::PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend)
    : spec_(std::move(spec)), id_(random_hex(8)), backend_(std::move(backend)) {}

PoolCore::~PoolCore() {
    try {
        close(false);
    } catch (...) {
    }
}

void PoolCore::start() {
    if (!initialised())
        throw ConfigError(
            "sky::init(argc, argv) was not called: make it the first line of main() so that "
            "worker processes of this program can serve calls");
    spec_.validate();
    bus_ = std::make_unique<EventBus>(spec_.display, spec_.on_event, [this] {
        std::vector<int> running;
        std::lock_guard lk(m_);
        for (auto& n : nodes_)
            running.push_back(static_cast<int>(std::min<std::size_t>(
                n->inflight.size(), static_cast<std::size_t>(spec_.concurrency))));
        return running;
    });
    started_at_ = Clock::now();
    cost_ = std::make_unique<CostTracker>(started_at_);
    try {
        // Written before anything is started: `sky gc` finds what a killed client left.
        ledger_ = Ledger::open(id_, spec_.provider.name(), "");
        if (!backend_) backend_ = make_backend(BackendContext{spec_, id_, ledger_.get()});
        for (int i = 0; i < spec_.nodes; ++i) {
            auto n = std::make_unique<NodeSlot>();
            n->index = i;
            nodes_.push_back(std::move(n));
        }
        // From here (backend and node slots in place, nothing started yet) a SIGINT, SIGTERM or
        // SIGHUP closes this pool before the program ends.
        signals::register_pool(weak_from_this());
        backend_->provision(spec_.nodes, [this](Event e) { emit(std::move(e)); });
        std::vector<std::exception_ptr> errors(nodes_.size());
        std::vector<std::thread> threads;
        for (int i = 0; i < spec_.nodes; ++i)
            threads.emplace_back([&, i] {
                try {
                    connect_node(i);
                } catch (...) {
                    errors[static_cast<std::size_t>(i)] = std::current_exception();
                }
            });
        for (auto& t : threads) t.join();
        for (auto& e : errors)
            if (e) std::rethrow_exception(e);
        send_layout();
        {
            std::lock_guard lk(m_);
            active_ = true;
            for (auto& n : nodes_) n->state = NodeSlot::State::ready;
        }
        for (auto& n : nodes_) n->reader = std::thread([this, p = n.get()] { reader_loop(p); });
        supervisor_ = std::thread([this] { supervisor_loop(); });
        emit(PoolStarted{id_, spec_.nodes});
    } catch (...) {
        close(false);
        throw;
    }
}

void PoolCore::connect_node(int i) {
    auto& n = *nodes_[static_cast<std::size_t>(i)];
    NodeStart s = backend_->connect(i, [this](Event e) { emit(std::move(e)); });
    {
        // A signal's teardown may run close() while the nodes start: it reads these.
        std::lock_guard lk(n.write_m);
        n.transport = std::move(s.transport);
    }
    {
        std::lock_guard lk(m_);
        n.instance = s.instance;
        if (closing_) throw CancelledError("the pool was closed while it started");
    }
    cost_started(n.instance);
    handshake(n, s.token);
}

void PoolCore::cost_started(const Instance& i) {
    std::lock_guard lk(m_);
    // A worker restarted on the machine it was lost on (SSH, Local: the same instance id) runs
    // on a machine whose bill never stopped.
    if (cost_->known(i.id)) return cost_->resume(i.id);
    // Instance carries the rate it runs at; on-demand instances are their own baseline.
    cost_->start(i.id, i.provider, i.spot, i.hourly_price,
                 i.spot ? i.on_demand_price : i.hourly_price, Clock::now());
}

void PoolCore::handshake(NodeSlot& n, const std::string& token) {
    auto& t = *n.transport;
    // A worker answers in well under a second. One silent for as long as a node may go without
    // its client (idle_timeout) is treated as gone, within [5 s, 60 s].
    const auto hello_bound = std::clamp<std::chrono::seconds>(
        spec_.idle_timeout, std::chrono::seconds(5), std::chrono::seconds(60));
    // Until the worker has proven it holds the token, frames are limited to the fixed size of
    // the auth frames, and nothing it sends is decoded. The token itself never travels.
    auto reader = std::make_unique<FrameReader>(t, auth_max_frame);
    try {
        client_authenticate(t, *reader, token, hello_bound);
    } catch (const ProtocolError& e) {
        throw ProtocolError(fmt::format("node {} ({}): {}", n.index, n.instance.id, e.what()));
    } catch (const std::exception& e) {
        throw Error(fmt::format("node {} ({}): {}", n.index, n.instance.id, e.what()));
    }
    // Authenticated: the hello may be larger, and is still decoded with a bounded archive.
    reader = std::make_unique<FrameReader>(std::move(*reader), 1 << 20);
    // The hello usually came in the same read as the proof: wait only when it is not here.
    if (!reader->has_buffered_frame() && !t.wait_readable(hello_bound))
        throw Error(fmt::format("node {} ({}): no hello from the worker within {} s", n.index,
                                n.instance.id, hello_bound.count()));
    Frame f;
    bool got = false;
    try {
        got = reader->next(f);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("node {} ({}): bad hello from the worker: {}", n.index,
                                        n.instance.id, e.what()));
    }
    if (!got || f.header.type != MsgType::hello)
        throw Error(fmt::format("node {} ({}): the worker closed the connection before its hello",
                                n.index, n.instance.id));
    WorkerHello wh;
    try {
        load_from(f.payload, wh);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("node {} ({}): unreadable worker hello: {}", n.index,
                                        n.instance.id, e.what()));
    }
    if (wh.protocol != protocol_version)
        throw ProtocolError(fmt::format("node {}: worker speaks protocol {}, this client {}",
                                        n.index, wh.protocol, protocol_version));
    if (wh.build_id != self_build_id())
        throw ProtocolError(fmt::format(
            "node {}: the worker runs a different build of the program (build id {}, this "
            "client {})",
            n.index, wh.build_id, self_build_id()));
    ClientHello ch;
    ch.pool_id = id_;
    ch.instance_id = n.instance.id;
    ch.node = n.index;
    ch.total_nodes = spec_.nodes;
    ch.concurrency = spec_.concurrency;
    ch.head_addr = backend_->head_address();
    ch.head_port = 0;  // the head's port comes with the layout, once every node is ready
    ch.private_addr = n.instance.private_ip.value_or(n.instance.public_ip.value_or(""));
    if (spec_.accelerator) {
        ch.accelerator = spec_.accelerator->to_string();
        for (int k = 0; k < spec_.accelerator->count; ++k)
            ch.accelerators.push_back(spec_.accelerator->name);
    }
    ch.idle_timeout_s = spec_.idle_timeout.count();
    ch.hard_timeout_s = spec_.timeout.count();
    ch.collect_metrics = spec_.collect_metrics;
    // SKY_METRICS_INTERVAL_MS shortens the sampling interval (tests, dashboards).
    if (const char* iv = std::getenv("SKY_METRICS_INTERVAL_MS"))
        ch.metrics_interval_ms = std::atoll(iv);
    Buffer payload;
    save_to(payload, ch);
    Buffer frame;
    append_frame(frame, MsgType::hello, 0, payload.span());
    std::span<const std::byte> one[] = {frame.span()};
    t.write_all(one);
    // The worker answers once its worker processes run (one per GPU or MIG slice): how many,
    // and a free port for each.
    WorkerReady ready;
    for (bool have_ready = false; !have_ready;) {
        if (!reader->has_buffered_frame() && !t.wait_readable(std::chrono::seconds(120)))
            throw Error(fmt::format("node {} ({}): the worker was not ready within 120 s", n.index,
                                    n.instance.id));
        try {
            if (!reader->next(f))
                throw Error("the worker closed the connection before it was ready");
            if (f.header.type == MsgType::ready) {
                load_from(f.payload, ready);
                have_ready = true;
            } else if (f.header.type == MsgType::log) {
                auto m = decode_log(f.payload);
                emit(LogLine{n.index, n.instance.id, std::move(m.line), m.timestamp});
            } else if (f.header.type != MsgType::heartbeat) {
                throw ProtocolError(fmt::format("a {} frame before the worker's ready frame",
                                                msg_type_name(f.header.type)));
            }
        } catch (const std::exception& e) {
            throw ProtocolError(fmt::format("node {} ({}): {}", n.index, n.instance.id, e.what()));
        }
    }
    if (ready.workers < 1 || ready.workers > 1024 ||
        ready.ports.size() != static_cast<std::size_t>(ready.workers))
        throw ProtocolError(
            fmt::format("node {} ({}): the worker's ready frame names {} worker "
                        "processes and {} ports",
                        n.index, n.instance.id, ready.workers, ready.ports.size()));
    // Heard from just now: a replacement is not judged by its predecessor's silence.
    n.last_heard = Clock::now().time_since_epoch().count();
    bool running;
    {
        std::lock_guard lk(m_);
        n.workers = ready.workers;
        n.ports = ready.ports;
        running = active_;
    }
    // The reader thread goes on with whatever this reader has buffered.
    n.frames = std::make_unique<FrameReader>(std::move(*reader), default_max_frame);
    if (running) send_layout(&n);  // a replacement: every node learns its new ports
}

void PoolCore::send_layout(const NodeSlot* joining) {
    PoolLayout l;
    std::vector<NodeSlot*> to;
    {
        std::lock_guard lk(m_);
        for (auto& x : nodes_) {
            if (!joining || x.get() == joining || x->state == NodeSlot::State::ready)
                to.push_back(x.get());
            std::string addr = x->instance.private_ip.value_or(x->instance.public_ip.value_or(""));
            if (addr.empty() && x->index == 0) addr = backend_->head_address();
            l.peers.push_back(addr);
            l.workers.push_back(std::max(1, x->workers));
            auto ports = x->ports;
            ports.resize(static_cast<std::size_t>(std::max(1, x->workers)), 0);
            l.ports.push_back(std::move(ports));
        }
    }
    Buffer payload;
    save_to(payload, l);
    Buffer frame;
    append_frame(frame, MsgType::layout, 0, payload.span());
    std::span<const std::byte> one[] = {frame.span()};
    for (auto* x : to) {
        std::lock_guard lk(x->write_m);
        try {
            if (x->transport) x->transport->write_all(one);
        } catch (...) {
            // The reader sees the broken connection and handles the loss.
            if (x->transport) x->transport->shutdown();
        }
    }
}

std::shared_ptr<BatchState> PoolCore::submit(const std::vector<const CallDesc*>& calls,
                                             bool broadcast) {
    // A broadcast with a distributed plugin runs once per rank: W calls on each node.
    const bool per_rank =
        broadcast && !calls.empty() && calls[0]->options.plugin.kind != PluginSpec::none;
    std::vector<int> ranks_on(nodes_.size(), 1);
    if (per_rank) {
        std::lock_guard lk(m_);
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            ranks_on[i] = std::max(1, nodes_[i]->workers);
    }
    std::size_t ranks = 0;
    for (int r : ranks_on) ranks += static_cast<std::size_t>(r);
    const std::size_t n = broadcast ? ranks : calls.size();
    auto batch = std::make_shared<BatchState>(n);
    // A Future may outlive its pool: cancelling then finds nothing to cancel.
    BatchState* raw = batch.get();
    batch->cancel = [core = weak_from_this(), raw] {
        auto c = core.lock();
        return c ? c->cancel_batch(raw) : false;
    };
    if (n == 0) return batch;
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    {
        std::lock_guard lk(m_);
        auto now = Clock::now();
        auto make = [&](const CallDesc& c, std::size_t index, int pinned) {
            Task t;
            t.batch = batch;
            t.index = index;
            t.call = c;
            t.retries_left = c.options.retries;
            t.pinned = pinned;
            t.seq = ++next_seq_;
            if (c.options.timeout) {
                t.deadline = now + *c.options.timeout;
                deadlines_.emplace(*t.deadline, t.seq);
            }
            return t;
        };
        if (closing_ || !active_) {
            for (std::size_t i = 0; i < n; ++i)
                done.push_back(
                    {batch, i, {}, std::make_exception_ptr(Error("the pool is closed"))});
        } else if (broadcast) {
            std::size_t index = 0;  // rank order: node 0's worker processes first
            for (std::size_t i = 0; i < nodes_.size(); ++i) {
                auto& node = *nodes_[i];
                for (int w = 0; w < ranks_on[i]; ++w, ++index) {
                    if (node.state == NodeSlot::State::ready ||
                        node.state == NodeSlot::State::restarting) {
                        Task t = make(*calls[0], index, static_cast<int>(i));
                        t.pinned_worker = per_rank ? w : -1;
                        node.pinned.push_back(std::move(t));
                    } else {
                        done.push_back(
                            {batch,
                             index,
                             {},
                             std::make_exception_ptr(NodeLostError(
                                 static_cast<int>(i), node.instance.id,
                                 NodeLostError::Reason::unreachable,
                                 "the node was lost earlier and could not be replaced"))});
                    }
                }
            }
        } else if (!any_live_locked()) {
            // Every node is gone for good (lost, past the pool's timeout, not replaceable):
            // waiting could only be forever.
            for (std::size_t i = 0; i < n; ++i)
                done.push_back({batch, i, {}, no_live_node_locked(now)});
        } else {
            for (std::size_t i = 0; i < n; ++i) pending_.push_back(make(*calls[i], i, -1));
        }
        dispatch_locked(out);
        if (!deadlines_.empty()) sup_cv_.notify_one();
    }
    send(out);
    finish(done);
    return batch;
}

void PoolCore::dispatch_locked(std::vector<Outgoing>& out) {
    std::size_t slots = 0;
    for (auto& n : nodes_)
        if (n->state == NodeSlot::State::ready)
            slots += static_cast<std::size_t>(spec_.concurrency * std::max(1, n->workers));
    if (slots == 0) return;
    const std::size_t conc = static_cast<std::size_t>(spec_.concurrency);
    const std::size_t N = nodes_.size();
    bool progress = true;
    while (progress) {
        progress = false;
        std::size_t depth = std::clamp<std::size_t>(pending_.size() / slots, 1, max_pipeline_depth);
        for (std::size_t k = 0; k < N; ++k) {
            std::size_t i = (rr_ + k) % N;
            auto& n = *nodes_[i];
            if (n.state != NodeSlot::State::ready) continue;
            std::size_t cap = conc * static_cast<std::size_t>(std::max(1, n.workers)) * depth;
            if (!n.pinned.empty() && n.inflight.size() < cap) {
                Task t = std::move(n.pinned.front());
                n.pinned.pop_front();
                assign_locked(n, std::move(t), out[i]);
                progress = true;
            } else if (!pending_.empty() && n.inflight.size() < cap) {
                auto it = pick_pending_locked(i);
                if (it == pending_.end()) continue;
                Task t = std::move(*it);
                pending_.erase(it);
                assign_locked(n, std::move(t), out[i]);
                progress = true;
            }
        }
        rr_ = (rr_ + 1) % N;
    }
}

std::deque<Task>::iterator PoolCore::pick_pending_locked(std::size_t i) {
    const int node = static_cast<int>(i);
    bool others = false;
    for (std::size_t j = 0; j < nodes_.size() && !others; ++j)
        others = j != i && (nodes_[j]->state == NodeSlot::State::ready ||
                            nodes_[j]->state == NodeSlot::State::restarting);
    // A retry goes to another node (api.md: .retries); on a one-node pool, to its replacement.
    // The look-ahead is bounded: a long run of such retries waits for the other nodes.
    auto it = pending_.begin();
    for (int k = 0; it != pending_.end() && k < 64; ++it, ++k)
        if (!others || it->lost_on != node) return it;
    return pending_.end();
}

void PoolCore::assign_locked(NodeSlot& n, Task&& t, Outgoing& out) {
    const std::uint64_t id = ++next_call_id_;
    const auto& c = t.call;
    const std::size_t args = c.args ? c.args->size() : 0;
    // A distributed call carries its plugin and the worker process (local rank) it is for.
    Buffer plugin;
    if (c.options.plugin.kind != PluginSpec::none)
        append_call_plugin(plugin,
                           {c.options.plugin.kind, c.options.plugin.backend, t.pinned_worker});
    const std::size_t len = plugin.size() + call_header_size(c.function.size()) + args;
    std::size_t at = out.small.size();
    out.small.resize(at + frame_header_size);
    encode_header(out.small.data() + at, MsgType::call, id, len,
                  plugin.empty() ? std::uint16_t{0} : call_flag_plugin);
    if (!plugin.empty()) out.small.append(plugin.data(), plugin.size());
    append_call_header(out.small, c.function, c.signature);
    if (args > (64u << 10))
        out.big.emplace_back(out.small.size(), c.args);
    else if (args)
        out.small.append(c.args->data(), args);
    if (t.deadline) timed_inflight_[t.seq] = {n.index, id};
    n.inflight.emplace(id, std::move(t));
}

void PoolCore::send(std::vector<Outgoing>& out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& o = out[i];
        if (o.empty()) continue;
        auto& n = *nodes_[i];
        std::vector<std::span<const std::byte>> spans;
        std::size_t from = 0;
        for (auto& [at, buf] : o.big) {
            spans.push_back(o.small.span().subspan(from, at - from));
            spans.push_back(buf->span());
            from = at;
        }
        spans.push_back(o.small.span().subspan(from));
        std::lock_guard lk(n.write_m);
        try {
            if (n.transport) n.transport->write_all(spans);
        } catch (...) {
            // The reader sees the broken connection and handles the loss.
            if (n.transport) n.transport->shutdown();
        }
    }
}

void PoolCore::send_control(NodeSlot& n, MsgType type, std::uint64_t call_id) {
    std::byte h[frame_header_size];
    encode_header(h, type, call_id, 0);
    std::span<const std::byte> one[] = {{h, frame_header_size}};
    std::lock_guard lk(n.write_m);
    try {
        if (n.transport) n.transport->write_all(one);
    } catch (...) {
        if (n.transport) n.transport->shutdown();
    }
}

void PoolCore::finish(std::vector<Completion>& done) {
    for (auto& c : done) {
        if (c.error)
            c.batch->fail(c.index, c.error);
        else
            c.batch->complete(c.index, std::move(c.result));
    }
    done.clear();
}

std::exception_ptr PoolCore::error_from(const NodeSlot& n, const Task& t, ErrorMsg e) {
    if (e.kind == ErrorMsg::cancelled)
        return std::make_exception_ptr(
            CancelledError(fmt::format("{} was cancelled before it started", t.call.function)));
    if (e.log_tail.empty()) e.log_tail = t.log_tail;
    return std::make_exception_ptr(RemoteError(std::string(t.call.function), n.index, n.instance.id,
                                               e.type_name, e.message, std::move(e.log_tail)));
}

namespace {
/// The error of a call that did not finish within its .timeout().
std::exception_ptr timeout_error(const Task& t) {
    return std::make_exception_ptr(
        TimeoutError(fmt::format("{} did not finish within {} ms", t.call.function,
                                 t.call.options.timeout ? t.call.options.timeout->count() : 0)));
}
}  // namespace

void PoolCore::reader_loop(NodeSlot* n) {
    std::string why = "the worker closed the connection";
    bool protocol_error = false;
    std::vector<Received> got;
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    auto flush = [&] {
        if (got.empty()) return;
        {
            std::lock_guard lk(m_);
            for (auto& r : got) {
                if (r.type == MsgType::log) {
                    auto it = n->inflight.find(r.call_id);
                    if (it != n->inflight.end()) {
                        auto& tail = it->second.log_tail;
                        auto m = decode_log(r.payload.span());
                        tail.push_back(std::move(m.line));
                        if (tail.size() > 20) tail.erase(tail.begin());
                    }
                    continue;
                }
                auto it = n->inflight.find(r.call_id);
                if (it == n->inflight.end()) continue;  // timed out or cancelled already
                Task t = std::move(it->second);
                n->inflight.erase(it);
                if (t.deadline) timed_inflight_.erase(t.seq);
                // A result after the call's deadline (the supervisor had not got to it yet)
                // did not finish in time: the call fails as its .timeout() says.
                if (t.deadline && Clock::now() > *t.deadline)
                    done.push_back({t.batch, t.index, {}, timeout_error(t)});
                else if (r.type == MsgType::result)
                    done.push_back({t.batch, t.index, std::move(r.payload), nullptr});
                else
                    done.push_back({t.batch, t.index, {}, error_from(*n, t, std::move(r.error))});
            }
            dispatch_locked(out);
        }
        got.clear();
        send(out);
        for (auto& o : out) {
            o.small.clear();
            o.big.clear();
        }
        finish(done);
    };
    try {
        FrameReader& reader = *n->frames;
        Frame f;
        n->last_heard = Clock::now().time_since_epoch().count();
        while (reader.next(f)) {
            n->last_heard = Clock::now().time_since_epoch().count();
            switch (f.header.type) {
                case MsgType::result:
                    got.push_back({f.header.call_id, f.header.type, f.take_payload(), {}});
                    break;
                case MsgType::error: {
                    // Decoded here, not under the lock: an unreadable one ends the connection.
                    ErrorMsg e;
                    try {
                        load_from(f.payload, e);
                    } catch (const std::exception& x) {
                        throw ProtocolError(fmt::format("unreadable error frame: {}", x.what()));
                    }
                    got.push_back({f.header.call_id, f.header.type, {}, std::move(e)});
                    break;
                }
                case MsgType::log: {
                    auto m = decode_log(f.payload);
                    if (f.header.call_id) {
                        Received r{f.header.call_id, MsgType::log, {}, {}};
                        r.payload.append(f.payload.data(), f.payload.size());
                        got.push_back(std::move(r));
                    }
                    emit(LogLine{n->index, n->instance.id, std::move(m.line), m.timestamp});
                    break;
                }
                case MsgType::heartbeat:
                    break;
                case MsgType::metrics: {
                    MetricsSample m;
                    try {
                        load_from(f.payload, m);
                    } catch (const std::exception& e) {
                        throw ProtocolError(fmt::format("unreadable metrics frame: {}", e.what()));
                    }
                    emit(Metrics{n->instance.id, n->index, m.cpu_percent, m.memory_percent,
                                 m.memory_used_mb, m.memory_total_mb, m.gpu_utilization,
                                 m.gpu_memory_used_mb, m.gpu_memory_total_mb, m.gpu_temperature});
                    break;
                }
                default:
                    throw ProtocolError(fmt::format("unexpected {} frame from the worker",
                                                    msg_type_name(f.header.type)));
            }
            if (!reader.has_buffered_frame()) flush();
        }
    } catch (const ProtocolError& e) {
        why = e.what();
        protocol_error = true;
    } catch (const std::exception& e) {
        why = e.what();
    }
    flush();
    node_lost(n, why, protocol_error);
}

void PoolCore::node_lost(NodeSlot* n, const std::string& why, bool protocol_error) {
    bool closing;
    {
        std::lock_guard lk(m_);
        closing = closing_;
    }
    if (n->transport) n->transport->shutdown();
    NodeExit ex;
    if (protocol_error) {
        ex = {NodeLostError::Reason::unreachable, why};
        emit(ErrorEvent{
            fmt::format("node {}: protocol error, closing its connection: {}", n->index, why),
            n->instance.id});
    } else if (!closing) {
        ex = backend_->exit_reason(n->index);
        // The supervisor ended a silent node: that, not the closed connection, is the reason.
        if (n->silent.exchange(false) && ex.reason == NodeLostError::Reason::unreachable) {
            std::lock_guard wl(n->write_m);
            ex.detail = n->silence_reason;
        }
    }
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    bool restart = false;
    {
        std::lock_guard lk(m_);
        if (closing_) {
            n->state = NodeSlot::State::closed;
            return;
        }
        n->state = NodeSlot::State::lost;
        n->lost_reason = ex.reason;
        n->lost_detail = ex.detail;
        cost_->stop(n->instance.id, Clock::now());
        auto lost_error = [&](const Task& t) {
            std::string detail = ex.detail;
            if (!t.log_tail.empty())
                detail +=
                    fmt::format("; last output of {}: {}", t.call.function, t.log_tail.back());
            return std::make_exception_ptr(
                NodeLostError(n->index, n->instance.id, ex.reason, detail));
        };
        std::vector<Task> requeue;
        for (auto& [id, t] : n->inflight) {
            if (t.deadline) timed_inflight_.erase(t.seq);
            if (t.retries_left > 0 && t.pinned < 0) {
                --t.retries_left;
                t.lost_on = n->index;
                requeue.push_back(std::move(t));
            } else {
                done.push_back({t.batch, t.index, {}, lost_error(t)});
            }
        }
        n->inflight.clear();
        for (auto it = requeue.rbegin(); it != requeue.rend(); ++it)
            pending_.push_front(std::move(*it));
        for (auto& t : n->pinned) done.push_back({t.batch, t.index, {}, lost_error(t)});
        n->pinned.clear();
        if (backend_->can_restart(n->index) && n->restarts < max_restarts &&
            Clock::now() - started_at_ < spec_.timeout) {
            n->state = NodeSlot::State::restarting;
            ++n->restarts;
            restart_queue_.push_back(n->index);
            restart = true;
        }
        dispatch_locked(out);
        if (!any_live_locked())
            fail_all_pending_locked(done, [&] { return no_live_node_locked(Clock::now()); });
    }
    if (ex.reason == NodeLostError::Reason::preempted)
        emit(InstancePreempted{n->instance.id, n->index, ex.detail});
    emit(ErrorEvent{fmt::format("node {} lost: {}{}", n->index, ex.detail,
                                restart ? "; starting a replacement" : ""),
                    n->instance.id});
    send(out);
    finish(done);
    if (restart) sup_cv_.notify_one();
}

bool PoolCore::any_live_locked() const {
    return std::any_of(nodes_.begin(), nodes_.end(), [](auto& x) {
        return x->state == NodeSlot::State::ready || x->state == NodeSlot::State::restarting;
    });
}

std::exception_ptr PoolCore::no_live_node_locked(Clock::time_point now) const {
    // Names the first node and why it ended; the pool's timeout, when it is the cause.
    const NodeSlot& first = *nodes_.front();
    std::string detail = fmt::format("every node of the pool is lost (node {}: {})", first.index,
                                     first.lost_detail.empty() ? "lost" : first.lost_detail);
    if (now - started_at_ >= spec_.timeout)
        detail += fmt::format("; the pool's timeout of {} s has passed, so none is replaced",
                              spec_.timeout.count());
    return std::make_exception_ptr(
        NodeLostError(first.index, first.instance.id, first.lost_reason, detail));
}

void PoolCore::fail_all_pending_locked(std::vector<Completion>& done,
                                       const std::function<std::exception_ptr()>& why) {
    for (auto& t : pending_) {
        if (t.deadline) timed_inflight_.erase(t.seq);
        done.push_back({t.batch, t.index, {}, why()});
    }
    pending_.clear();
}

void PoolCore::restart_node(int i) {
    auto& n = *nodes_[static_cast<std::size_t>(i)];
    if (n.reader.joinable()) n.reader.join();
    std::string old_id = n.instance.id;
    {
        std::lock_guard lk(n.write_m);
        n.frames.reset();  // reads from the transport
        n.transport.reset();
    }
    try {
        NodeStart s = backend_->connect(i, [this](Event e) { emit(std::move(e)); });
        {
            std::lock_guard lk(n.write_m);
            n.transport = std::move(s.transport);
        }
        {
            std::lock_guard lk(m_);
            n.instance = s.instance;
        }
        cost_started(n.instance);
        handshake(n, s.token);
    } catch (const std::exception& e) {
        emit(ErrorEvent{fmt::format("node {}: replacement failed: {}", i, e.what()), old_id});
        std::vector<Completion> done;
        {
            std::lock_guard lk(m_);
            n.state = NodeSlot::State::lost;
            n.lost_reason = NodeLostError::Reason::unreachable;
            n.lost_detail = fmt::format("its replacement failed: {}", e.what());
            // Calls pinned to this node while it was being replaced (a broadcast's share) can
            // never run now: they fail instead of waiting forever.
            for (auto& t : n.pinned) {
                done.push_back({t.batch,
                                t.index,
                                {},
                                std::make_exception_ptr(
                                    NodeLostError(i, old_id, n.lost_reason, n.lost_detail))});
            }
            n.pinned.clear();
            if (!any_live_locked())
                fail_all_pending_locked(done, [&] { return no_live_node_locked(Clock::now()); });
        }
        finish(done);
        return;
    }
    std::vector<Outgoing> out(nodes_.size());
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        n.state = NodeSlot::State::ready;
        n.reader = std::thread([this, p = &n] { reader_loop(p); });
        dispatch_locked(out);
    }
    emit(InstanceReplaced{old_id, n.instance.id, i});
    send(out);
}

void PoolCore::supervisor_loop() {
    const auto hb = std::clamp<std::chrono::seconds>(
        spec_.idle_timeout / 4, std::chrono::seconds(1), std::chrono::seconds(30));
    auto next_hb = Clock::now() + hb;
    const auto silence_bound = 4 * hb + std::chrono::seconds(5);
    const auto cost_interval = std::chrono::seconds(10);
    auto next_cost = Clock::now() + cost_interval;
    std::unique_lock lk(m_);
    while (!stop_supervisor_) {
        auto wake = std::min(next_hb, next_cost);
        if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
        if (restart_queue_.empty()) sup_cv_.wait_until(lk, wake);
        if (stop_supervisor_) break;
        // Each replacement on a thread of its own: connecting may take many seconds (an
        // unreachable host), and meanwhile deadlines, heartbeats and silent nodes are the
        // supervisor's to watch.
        while (!restart_queue_.empty() && !closing_) {
            int i = restart_queue_.front();
            restart_queue_.pop_front();
            restarters_.emplace_back([this, i] { restart_node(i); });
        }
        auto now = Clock::now();
        std::vector<Completion> done;
        std::vector<std::pair<int, std::uint64_t>> cancels;
        while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
            std::uint64_t seq = deadlines_.begin()->second;
            deadlines_.erase(deadlines_.begin());
            if (auto it = timed_inflight_.find(seq); it != timed_inflight_.end()) {
                auto [node, call_id] = it->second;
                timed_inflight_.erase(it);
                auto& n = *nodes_[static_cast<std::size_t>(node)];
                if (auto t = n.inflight.find(call_id); t != n.inflight.end()) {
                    done.push_back(
                        {t->second.batch, t->second.index, {}, timeout_error(t->second)});
                    n.inflight.erase(t);
                    cancels.emplace_back(node, call_id);
                }
                continue;
            }
            auto drop = [&](std::deque<Task>& q) {
                for (auto t = q.begin(); t != q.end(); ++t)
                    if (t->seq == seq) {
                        done.push_back({t->batch, t->index, {}, timeout_error(*t)});
                        q.erase(t);
                        return true;
                    }
                return false;
            };
            if (!drop(pending_))
                for (auto& n : nodes_)
                    if (drop(n->pinned)) break;
        }
        bool heartbeat = now >= next_hb;
        if (heartbeat) next_hb = now + hb;
        // A worker answers every heartbeat, even while its calls run: one that stays silent
        // for several of them is frozen or cut off, and its calls must not wait forever.
        std::vector<std::pair<NodeSlot*, std::string>> silent;
        for (auto& n : nodes_) {
            if (n->state != NodeSlot::State::ready || n->last_heard == 0) continue;
            const auto quiet = now - Clock::time_point(Clock::duration(n->last_heard.load()));
            if (quiet > silence_bound)
                silent.emplace_back(
                    n.get(),
                    fmt::format("the worker answered no heartbeat for {} s",
                                std::chrono::duration_cast<std::chrono::seconds>(quiet).count()));
        }
        std::optional<CostSnapshot> cost_update;
        if (now >= next_cost) {
            next_cost = now + cost_interval;
            auto snap = cost_->snapshot(now);
            if (snap.hourly_rate > 0) cost_update = snap;  // Local and SSH cost nothing
        }
        lk.unlock();
        for (auto& [n, why] : silent) {
            if (n->silent.exchange(true)) continue;  // ended already
            emit(ErrorEvent{fmt::format("node {}: {}; closing its connection", n->index, why),
                            n->instance.id});
            std::lock_guard wl(n->write_m);
            n->silence_reason = why;
            if (n->transport) n->transport->shutdown();
        }
        for (auto [node, id] : cancels)
            send_control(*nodes_[static_cast<std::size_t>(node)], MsgType::cancel, id);
        if (heartbeat)
            for (auto& n : nodes_)
                if (n->state == NodeSlot::State::ready) send_control(*n, MsgType::heartbeat, 0);
        finish(done);
        if (cost_update)
            emit(CostUpdate{cost_update->elapsed_seconds, cost_update->accumulated_cost,
                            cost_update->hourly_rate, cost_update->spot_count,
                            cost_update->ondemand_count});
        lk.lock();
    }
}

bool PoolCore::cancel_batch(BatchState* b) {
    std::vector<Completion> done;
    std::vector<std::pair<int, std::uint64_t>> cancels;
    {
        std::lock_guard lk(m_);
        auto err = [] { return std::make_exception_ptr(CancelledError("the call was cancelled")); };
        auto sweep = [&](std::deque<Task>& q) {
            for (auto it = q.begin(); it != q.end();) {
                if (it->batch.get() == b) {
                    done.push_back({it->batch, it->index, {}, err()});
                    it = q.erase(it);
                } else {
                    ++it;
                }
            }
        };
        sweep(pending_);
        for (auto& n : nodes_) {
            sweep(n->pinned);
            for (auto it = n->inflight.begin(); it != n->inflight.end();) {
                if (it->second.batch.get() == b) {
                    if (it->second.deadline) timed_inflight_.erase(it->second.seq);
                    done.push_back({it->second.batch, it->second.index, {}, err()});
                    cancels.emplace_back(n->index, it->first);
                    it = n->inflight.erase(it);
                } else {
                    ++it;
                }
            }
        }
    }
    for (auto [node, id] : cancels)
        send_control(*nodes_[static_cast<std::size_t>(node)], MsgType::cancel, id);
    bool any = !done.empty();
    finish(done);
    return any;
}

void PoolCore::close(bool report) {
    // A signal's teardown waits for every close() in progress, whichever thread runs it.
    signals::CloseScope signal_scope(this);
    std::vector<Completion> done;
    {
        std::lock_guard lk(m_);
        if (closed_) return;
        closed_ = true;
        closing_ = true;
        active_ = false;
        stop_supervisor_ = true;
        auto err = [] { return std::make_exception_ptr(CancelledError("the pool was closed")); };
        fail_all_pending_locked(done, err);
        for (auto& n : nodes_) {
            for (auto& t : n->pinned) done.push_back({t.batch, t.index, {}, err()});
            for (auto& [id, t] : n->inflight) done.push_back({t.batch, t.index, {}, err()});
            n->pinned.clear();
            n->inflight.clear();
        }
    }
    sup_cv_.notify_all();
    if (backend_) backend_->begin_stop();  // a replacement in progress gives up
    finish(done);
    if (bus_) emit(PoolStopping{});
    for (auto& n : nodes_) {
        // The supervisor may be replacing this node right now (restart_node writes the instance
        // under m_ and the transport under write_m): read each under its own lock.
        std::string id;
        {
            std::lock_guard lk(m_);
            id = n->instance.id;
        }
        {
            std::lock_guard lk(n->write_m);
            if (!n->transport) continue;
        }
        if (bus_) emit(InstanceStopping{id});
        send_control(*n, MsgType::shutdown, 0);  // takes write_m and checks the transport again
    }
    if (supervisor_.joinable()) supervisor_.join();
    for (auto& r : restarters_) r.join();  // they give up: begin_stop() and closing_
    if (backend_) backend_->stop_all();
    if (ledger_) ledger_->close();
    for (auto& n : nodes_) {
        {
            std::lock_guard lk(n->write_m);
            if (n->transport) n->transport->shutdown();
        }
        if (n->reader.joinable()) n->reader.join();
    }
    if (bus_) {
        CostSummary c;
        {
            std::lock_guard lk(m_);
            auto end = Clock::now();
            for (auto& n : nodes_)
                if (!n->instance.id.empty()) cost_->stop(n->instance.id, end);
            c = cost_->finish(end);
        }
        emit(CostFinal{c.total_cost, c.total_seconds, c.hourly_rate, c.spot_count, c.ondemand_count,
                       c.savings_vs_ondemand});
        bus_->stop();
    }
    if (report && backend_) {
        std::vector<std::string> left = backend_->leftovers();
        if (!left.empty())
            throw Error(fmt::format(
                "pool {}: could not confirm that these stopped: {}; `sky gc` ends them (the "
                "ledger and their tags name them)",
                id_, fmt::join(left, "; ")));
    }
}

bool PoolCore::active() const noexcept {
    std::lock_guard lk(m_);
    return active_;
}

int PoolCore::instance_count() const noexcept {
    std::lock_guard lk(m_);
    int c = 0;
    for (auto& n : nodes_)
        if (n->state == NodeSlot::State::ready || n->state == NodeSlot::State::restarting) ++c;
    return active_ ? c : 0;
}

std::vector<Instance> PoolCore::instances() const {
    std::lock_guard lk(m_);
    std::vector<Instance> v;
    for (auto& n : nodes_)
        if (n->state == NodeSlot::State::ready) v.push_back(n->instance);
    return v;
}

double PoolCore::cost() const {
    std::lock_guard lk(m_);
    return cost_ ? cost_->snapshot(Clock::now()).accumulated_cost : 0.0;
}

}  // namespace sky::detail
