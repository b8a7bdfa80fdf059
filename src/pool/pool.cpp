// ComputePool: a handle on PoolCore; and what sky/asio.hpp needs from libsky. A pool is made
// where the providers are wired to it, in the composition root
// (src/providers/registry/compute_pool.cpp: ComputePool(PoolSpec), start_pool).
#include "sky/pool.hpp"

#include "io/io_core.hpp"
#include "pool/pool_core.hpp"
#include "sky/asio.hpp"

namespace sky::inline v0 {

namespace detail {

boost::asio::io_context& io_context() { return io::context(); }

}  // namespace detail

PoolSpec::~PoolSpec() = default;

ComputePool::~ComputePool() {
    if (core_) core_->close(false);
}
ComputePool::ComputePool(Adopt, std::shared_ptr<detail::PoolCore> core) noexcept
    : core_(std::move(core)) {}
ComputePool::ComputePool(ComputePool&&) noexcept = default;
ComputePool& ComputePool::operator=(ComputePool&& o) noexcept {
    if (this != &o) {
        if (core_) core_->close(false);
        core_ = std::move(o.core_);
    }
    return *this;
}

std::shared_ptr<detail::BatchState> ComputePool::start(std::vector<const detail::CallDesc*> calls,
                                                       detail::BatchKind kind) {
    if (!core_) throw Error("this ComputePool was moved from: it runs nothing");
    return core_->submit(calls, kind == detail::BatchKind::broadcast);
}
std::shared_ptr<detail::BatchState> ComputePool::start_one(const detail::CallDesc& call,
                                                           detail::BatchKind kind) {
    return start({&call}, kind);
}
std::shared_ptr<detail::BatchState> ComputePool::start_all(
    const std::vector<detail::CallDesc>& calls) {
    std::vector<const detail::CallDesc*> ptrs;
    ptrs.reserve(calls.size());
    for (auto& c : calls) ptrs.push_back(&c);
    return start(std::move(ptrs), detail::BatchKind::calls);
}

namespace {
Future<void> void_future(std::shared_ptr<detail::BatchState> st) {
    return Future<void>(std::move(st), [](detail::BatchState& s) {
        if (auto e = s.first_error()) std::rethrow_exception(e);
    });
}
}  // namespace

Future<void> ComputePool::resize(int n) {
    if (!core_) throw Error("ComputePool::resize(): this pool was moved from");
    return void_future(core_->resize(n));
}
void ComputePool::resize(const Autoscale& bounds) {
    if (!core_) throw Error("ComputePool::resize(): this pool was moved from");
    core_->resize(bounds);
}
Future<void> ComputePool::drain(int node) {
    if (!core_) throw Error("ComputePool::drain(): this pool was moved from");
    return void_future(core_->drain(node));
}
void ComputePool::release_world() {
    if (!core_) throw Error("ComputePool::release_world(): this pool was moved from");
    core_->release_world();
}

void ComputePool::close() {
    if (core_) core_->close(true);
}
bool ComputePool::is_active() const noexcept { return core_ && core_->active(); }
int ComputePool::instance_count() const noexcept { return core_ ? core_->instance_count() : 0; }
std::vector<Instance> ComputePool::instances() const {
    return core_ ? core_->instances() : std::vector<Instance>{};
}
double ComputePool::cost() const { return core_ ? core_->cost() : 0.0; }
const std::string& ComputePool::id() const noexcept {
    static const std::string none;
    return core_ ? core_->id() : none;
}
const PoolSpec& ComputePool::spec() const {
    if (!core_) throw Error("ComputePool::spec(): this pool was moved from and has no spec");
    return core_->spec();
}
void ComputePool::add_handler(std::function<void(const Event&)> h) {
    // A handler on a moved-from pool would never be called: say so instead.
    if (!core_) throw Error("ComputePool::on(): this pool was moved from and sends no events");
    core_->add_handler(std::move(h));
}

}  // namespace sky::inline v0
