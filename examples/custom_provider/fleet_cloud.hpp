#pragma once
// FleetCloud: sky on machines you already own. A lab's bare-metal fleet sits behind a small REST
// inventory (README.md in this folder has its contract); this adapter maps sky's cloud interface
// (<sky/cloud.hpp>, docs/providers.md "Your own cloud") onto it. Only sky's public headers here:
// libcurl and nlohmann-json stay in fleet_cloud.cpp.
#include <sky/cloud.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace fleet {

/// A lab's machines as a sky provider: `.provider = fleet::FleetCloud{url, token}`.
class FleetCloud : public sky::CloudAdapter {
public:
    /// `url`: the inventory, e.g. "https://fleet.lab.example"; `token`: its bearer token (sent in
    /// the Authorization header only, never written anywhere else).
    FleetCloud(std::string url, std::string token);

    /// "fleet": the provider in offers, events and `sky ls`.
    [[nodiscard]] std::string name() const override { return "fleet"; }
    /// One offer per machine type in the inventory (there is no catalog for a private fleet).
    [[nodiscard]] std::vector<sky::Offer> live_offers(
        const sky::Catalog& catalog, const sky::SelectionRequest& request,
        const std::function<void(sky::Event)>& notify) override;
    /// Claims a free machine of the offer's type; sky::CapacityError when every one is claimed.
    std::string launch(const sky::LaunchRequest& request) override;
    /// The machines of these claims, from one inventory listing.
    std::vector<sky::CloudInstance> describe(const std::vector<std::string>& ids) override;
    /// Releases these claims; a claim that is already released is success.
    void terminate(const std::vector<std::string>& ids) override;
    /// The machines that sky pool `pool_id` holds (every sky claim when empty).
    std::vector<sky::CloudInstance> list(std::string_view pool_id) override;
    /// root, and never power the machines off: they are the lab's, not rented.
    [[nodiscard]] sky::CloudLogin login() const override;

private:
    std::string url_;
    std::string token_;
};

}  // namespace fleet
