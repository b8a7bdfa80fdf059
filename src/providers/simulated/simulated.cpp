// sky::Simulated: a cloud in a box, as one more adapter on the cloud layer. Everything a pool
// does on a real cloud (offers and prices, launch rounds, capacity errors, waiting, the ledger,
// replacement, terminate-and-confirm, the sweep by tag) is the cloud layer's own code; this
// provider is only the "cloud", one file per role: the machine records other processes read
// (machine_records.*), the table of machines and their faults (simulated_cloud.hpp), the node
// starter that boots each machine's worker process with the events of a cloud node
// (simulated_node.*, counting_stream.hpp), and here the adapter the cloud layer sees and the
// provider's descriptor.
#include "providers/simulated/simulated.hpp"

#include <cmath>

#include "providers/cloud/collect.hpp"
#include "providers/simulated/provider.hpp"
#include "providers/simulated/simulated_cloud.hpp"
#include "providers/simulated/simulated_node.hpp"
#include "sky/catalog.hpp"
#include "sky/detail/registry.hpp"

namespace sky::detail {

namespace {

using namespace simulated;

class SimulatedAdapter final : public CloudAdapter {
public:
    /// `cloud` null: only the records of other processes (`sky ls`, `sky gc`).
    SimulatedAdapter(std::shared_ptr<SimCloud> cloud, std::uint64_t seed)
        : cloud_(std::move(cloud)), seed_(seed) {}

    std::string name() const override { return kProvider; }
    std::string region() const override { return kRegion; }

    // The catalog's rows of AWS in one region, relabelled: the catalog's instance types and
    // on-demand prices. The catalog knows AWS's spot prices only live (DescribeSpotPriceHistory),
    // so this cloud's spot market quotes them: a fixed fraction of the on-demand price per
    // instance type, from 0.25 to 0.45, drawn from the seed.
    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest&,
                                   const std::function<void(Event)>&) override {
        std::vector<Offer> out;
        for (Offer o : catalog.offers(kOffersFrom)) {
            if (o.region != kRegion) continue;
            o.provider = kProvider;
            if (o.spot_available && !o.spot_price)
                o.spot_price =
                    std::round(o.on_demand_price * spot_fraction(o.instance_type) * 10000.0) /
                    10000.0;
            out.push_back(std::move(o));
        }
        return out;
    }

    std::string launch(const LaunchRequest& r) override {
        if (!cloud_) throw std::runtime_error("this simulated cloud only lists machines");
        return cloud_->launch(r);
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        if (cloud_) return cloud_->describe(ids);
        std::vector<CloudInstance> out;
        for (const auto& id : ids) out.push_back(describe_record(id));
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        if (cloud_) return cloud_->terminate(ids);
        for (const auto& id : ids) terminate_record(id);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        if (cloud_) return cloud_->list(pool_id);
        std::vector<CloudInstance> out;
        for (const Record& r : all_records()) {
            if (!pool_id.empty() && r.pool != pool_id) continue;
            if (record_alive(r))
                out.push_back(instance_of(r, true));
            else
                remove_record(r.id);
        }
        return out;
    }

private:
    double spot_fraction(std::string_view instance_type) const {
        // FNV-1a from a seeded basis, then splitmix64.
        std::uint64_t h = fnv1a(instance_type, fnv1a_basis ^ seed_);
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
        return 0.25 + 0.20 * static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);
    }

    std::shared_ptr<SimCloud> cloud_;
    std::uint64_t seed_ = 0;
};

}  // namespace

ProviderDescriptor simulated_provider() {
    ProviderDescriptor d({
        // A simulated node is a worker process on this machine.
        .exposure = [](const PoolSpec&) { return this_machine_exposure(); },
        .billing = BillingPolicy{},  // per second at the catalog's prices, no minimum
        .runs_on_this_machine = true,
    });
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const Simulated* s = spec.provider.get<Simulated>();
        if (!s) return;
        try {
            // An autoscaled pool's faults may name any index below max.
            check_simulated(with_simulated_env(*s), std::max(spec.nodes, spec.autoscale.max),
                            problems);
        } catch (const ConfigError& e) {
            problems.push_back(std::string("provider: ") + e.what());
        }
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        Simulated config = with_simulated_env(*c.spec.provider.get<Simulated>());
        std::vector<std::string> problems;
        check_simulated(config, std::max(c.spec.nodes, c.spec.autoscale.max), problems);
        if (!problems.empty()) throw ConfigError("PoolSpec::" + problems.front());
        const std::uint64_t seed = config.seed;
        auto cloud = std::make_shared<simulated::SimCloud>(std::move(config), c.pool_id);
        simulated::SimCloud::watch_start(cloud);
        NodeStarter starter =
            [cloud](const NodeStartRequest& r,
                    const std::function<void(Event)>& emit) -> std::unique_ptr<NodeHandle> {
            return simulated::start_node(cloud, r, emit);
        };
        return make_cloud_backend(std::make_unique<SimulatedAdapter>(cloud, seed), c,
                                  std::move(starter));
    };
    d.make_adapter = [](std::string_view) -> std::unique_ptr<CloudAdapter> {
        return std::make_unique<SimulatedAdapter>(nullptr, 0);
    };
    add_cloud_gc(d);
    return d;
}

}  // namespace sky::detail
