// Where a pool is made: the composition root installs the registry's backend factory in the pool
// (install_registry) before the pool engine starts, so the engine never names the registry.
#include <boost/asio/post.hpp>

#include "io/io_core.hpp"
#include "pool/pool_core.hpp"
#include "providers/registry/registry.hpp"
#include "sky/asio.hpp"
#include "sky/pool.hpp"

namespace sky {

namespace detail {

void start_pool(PoolSpec spec, std::function<void(std::exception_ptr, ComputePool)> done) {
    std::shared_ptr<PoolCore> core;
    try {
        install_registry();
        spec.validate();
        core = std::make_shared<PoolCore>(std::move(spec));
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
    : core_((detail::install_registry(), spec.validate(),
             std::make_shared<detail::PoolCore>(std::move(spec)))) {
    core_->start();
}

}  // namespace sky
