// Where a pool is made: the composition root validates the spec (every provider's checks) and
// passes the pool engine its provider (the backend factory and the provider's stated facts), so
// the engine never names the registry or a provider.
#include <boost/asio/post.hpp>

#include "io/io_core.hpp"
#include "pool/pool_core.hpp"
#include "providers/registry/registry.hpp"
#include "sky/asio.hpp"
#include "sky/pool.hpp"

namespace sky::inline v0 {

namespace detail {

void start_pool(PoolSpec spec, std::function<void(std::exception_ptr, ComputePool)> done) {
    std::shared_ptr<PoolCore> core;
    try {
        spec.validate();
        PoolProvider provider = pool_provider(spec);
        core = std::make_shared<PoolCore>(std::move(spec), std::move(provider));
    } catch (...) {
        boost::asio::post(io::executor(), [e = std::current_exception(), done] {
            done(e, PoolAccess::adopt(nullptr));
        });
        return;
    }
    core->start_async(
        [core, done](std::exception_ptr e) { done(e, PoolAccess::adopt(e ? nullptr : core)); });
}

}  // namespace detail

ComputePool::ComputePool(PoolSpec spec)
    : core_((spec.validate(),
             std::make_shared<detail::PoolCore>(std::move(spec), detail::pool_provider(spec)))) {
    core_->start();
}

}  // namespace sky::inline v0
