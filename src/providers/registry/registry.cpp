// The list of built-in providers: each provider's folder defines its descriptor (declared in its
// provider.hpp, linked in CMakeLists.txt), and this file pairs it with its configuration type.
// The registry is the one place above the pool that names every provider; a provider's own
// folder names only itself.
#include "providers/registry/registry.hpp"

#include <tuple>
#include <type_traits>
#include <variant>

#include "providers/aws/provider.hpp"
#include "providers/cloud/provider.hpp"
#include "providers/digitalocean/provider.hpp"
#include "providers/kubernetes/provider.hpp"
#include "providers/local/provider.hpp"
#include "providers/runpod/provider.hpp"
#include "providers/simulated/provider.hpp"
#include "providers/slurm/provider.hpp"
#include "providers/ssh/provider.hpp"
#include "providers/vastai/provider.hpp"
#include "providers/verda/provider.hpp"

namespace sky::detail {

namespace {

/// One provider: its configuration type and the function that makes its descriptor.
template <class C, ProviderDescriptor (*Make)()>
struct Entry {
    using Config = C;
    static ProviderDescriptor make() {
        ProviderDescriptor d = Make();
        // A built-in provider's name is its configuration type's; a custom cloud's is its
        // adapter's, one per pool.
        if constexpr (!std::is_same_v<C, CustomCloud>) d.name = C::name;
        return d;
    }
};

/// Every provider. Adding one is its folder and one line here (and its link in CMakeLists.txt).
using Registry = std::tuple<Entry<Local, local_provider>,                //
                            Entry<SSH, ssh_provider>,                    //
                            Entry<AWS, aws_provider>,                    //
                            Entry<RunPod, runpod_provider>,              //
                            Entry<VastAI, vastai_provider>,              //
                            Entry<Verda, verda_provider>,                //
                            Entry<DigitalOcean, digitalocean_provider>,  //
                            Entry<Simulated, simulated_provider>,        //
                            Entry<Slurm, slurm_provider>,                //
                            Entry<Kubernetes, kubernetes_provider>,      //
                            Entry<CustomCloud, custom_provider>>;

/// The position of C's entry in E...; static_asserts that there is exactly one.
template <class C, class... E>
constexpr std::size_t entry_index(std::tuple<E...>*) {
    static_assert((std::size_t{std::is_same_v<C, typename E::Config>} + ...) == 1,
                  "every sky::Provider alternative needs exactly one descriptor in the registry "
                  "(src/providers/registry/registry.cpp, Registry)");
    std::size_t i = 0;
    (void)((std::is_same_v<C, typename E::Config> || (++i, false)) || ...);
    return i;
}

template <class C>
using EntryOf = std::tuple_element_t<entry_index<C>(static_cast<Registry*>(nullptr)), Registry>;

template <class V>
struct Descriptors;
template <class... C>
struct Descriptors<std::variant<C...>> {
    /// One descriptor per alternative, at its index.
    static std::vector<ProviderDescriptor> all() { return {EntryOf<C>::make()...}; }
    /// The built-in providers' (every alternative but a user's own cloud), in the same order.
    static std::vector<ProviderDescriptor> built_in() {
        std::vector<ProviderDescriptor> v;
        ((std::is_same_v<C, CustomCloud> ? void() : v.push_back(EntryOf<C>::make())), ...);
        return v;
    }
};

const std::vector<ProviderDescriptor>& by_alternative() {
    static const std::vector<ProviderDescriptor> all = Descriptors<Provider::Config>::all();
    return all;
}

}  // namespace

const std::vector<ProviderDescriptor>& providers() {
    static const std::vector<ProviderDescriptor> built_in =
        Descriptors<Provider::Config>::built_in();
    return built_in;
}

const ProviderDescriptor* find_provider(std::string_view name) {
    for (const auto& d : providers())
        if (d.name == name) return &d;
    return nullptr;
}

const ProviderDescriptor& descriptor_for(const Provider& provider) {
    return by_alternative()[provider.config().index()];
}

PoolProvider pool_provider(const PoolSpec& spec) {
    const ProviderDescriptor& d = descriptor_for(spec.provider);
    return PoolProvider{d.make_backend, d.facts.exposure.value(spec), d.facts.billing.value};
}

}  // namespace sky::detail
