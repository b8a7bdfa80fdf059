// `sky gc` for a cloud: the pools it hands over no longer run (their owner has ended, or their
// ledger is closed with something left). Their machines are terminated and confirmed gone with
// the same sweep the pool's own teardown uses, then their infrastructure is deleted, retried
// while the cloud still says it is in use.
#include "providers/cloud/collect.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "ledger/ledger.hpp"
#include "providers/cloud/sweep.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

// What collect_cloud names the provider by in its messages.
struct Named {
    std::string_view name;
};

// How long gc waits for a cloud to confirm that terminated machines are gone.
constexpr auto kConfirmLimit = std::chrono::seconds(180);

void collect_cloud(const Named& d, const InventoryFactory& make, std::vector<GcPool> pools,
                   const GcOptions& o) {
    if (pools.empty()) return;
    std::unique_ptr<MachineInventory> adapter;
    try {
        adapter = make("");
    } catch (const std::exception& e) {
        for (const auto& p : pools)
            o.fail(fmt::format("{}: cannot reach {}: {}", p.label, d.name, e.what()));
        return;
    }
    const std::string region = adapter->region();
    for (auto& p : pools) {
        const LedgerRecord* r = p.record;
        if (r && !r->region.empty() && !region.empty() && r->region != region) {
            o.fail(fmt::format(
                "{}: it ran in region {} but {} is set up for {}: run sky gc with that region "
                "(e.g. AWS_REGION={})",
                p.label, r->region, d.name, region, r->region));
            continue;
        }
        // `unknown`: the cloud does not know the id. For a pool that no longer runs, asked in
        // the region it ran in, that means gone (the eventual-consistency window after a launch
        // is long past); asked elsewhere it means nothing.
        const bool unknown_is_gone = !r || !r->region.empty() || region.empty();
        std::vector<std::string> live, unknown;
        try {
            if (!p.machines.empty())
                for (const auto& i : adapter->describe(p.machines)) {
                    const bool gone = i.state == CloudInstance::State::gone ||
                                      (unknown_is_gone && i.state == CloudInstance::State::unknown);
                    if (!gone) live.push_back(i.id);
                    if (i.state == CloudInstance::State::unknown) unknown.push_back(i.id);
                }
        } catch (const std::exception& e) {
            o.fail(fmt::format("{}: {} describe failed: {}", p.label, d.name, e.what()));
            continue;
        }
        if (!unknown_is_gone && !unknown.empty()) {
            // Its ledger does not say where it ran: an id unknown here may live elsewhere.
            o.fail(fmt::format(
                "{}: {} does not know {} in {}; its ledger does not name a region: if it ran in "
                "another one, run sky gc with that region",
                p.label, d.name, join(unknown, ", ", 64), region));
            continue;
        }
        if (o.dry_run) {
            o.say(live.empty()
                      ? fmt::format("{}: no machines left; would delete its key pair "
                                    "and firewall{}",
                                    p.label, r ? " and close its ledger" : "")
                      : fmt::format("{}: would terminate {}", p.label, join(live, ", ", 64)));
            continue;
        }
        if (!live.empty()) {
            o.say(fmt::format("{}: terminating {}", p.label, join(live, ", ", 64)));
            SweepOptions s;
            s.unknown_is_gone = unknown_is_gone;
            s.deadline = kConfirmLimit;
            const SweepResult swept = terminate_and_confirm(*adapter, live, s);
            if (!swept.left.empty()) {
                o.fail(fmt::format("{}: still stopping after {} s: {}{}; run sky gc again", p.label,
                                   kConfirmLimit.count(), join(swept.left, ", ", 64),
                                   swept.last_error.empty()
                                       ? std::string()
                                       : fmt::format(" ({}: {})", d.name, swept.last_error)));
                continue;
            }
        }
        // A firewall that a machine which has just ended still holds goes a little later.
        const std::vector<std::string> left =
            delete_infra_until_gone(*adapter, p.pool_id, adapter->timings().infra_wait);
        if (r) {
            try {
                Ledger::record_collected(*r, p.machines, left);
            } catch (const std::exception& e) {
                o.fail(fmt::format("{}: cannot update its ledger: {}", p.label, e.what()));
            }
            remove_key_directories(p.pool_id);
        }
        if (!left.empty())
            o.fail(fmt::format("{}: no machines left, but still there: {}; run sky gc again later",
                               p.label, join(left, ", ", 16)));
        else
            o.say(fmt::format("{}: nothing left; key pair and firewall deleted{}", p.label,
                              r ? "; ledger closed" : ""));
    }
}

}  // namespace

void remove_key_directories(const std::string& pool_id) noexcept {
    try {
        if (pool_id.size() < 8) return;
        const std::string marker = "-" + pool_id + "-";
        std::error_code ec;
        const auto tmp = std::filesystem::temp_directory_path(ec);
        if (ec) return;
        for (const auto& e : std::filesystem::directory_iterator(tmp, ec)) {
            const std::string name = e.path().filename().string();
            if (name.rfind("sky-", 0) != 0 || name.find(marker) == std::string::npos) continue;
            struct stat st {};
            if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
                st.st_uid != ::geteuid())
                continue;
            std::error_code rm;
            std::filesystem::remove_all(e.path(), rm);
        }
    } catch (...) {
    }
}

void add_cloud_gc(ProviderDescriptor& d, InventoryFactory make) {
    if (!d.list_machines)
        d.list_machines = [make](const MachineQuery& q) {
            auto inventory = make(q.region);
            Machines m;
            m.region = inventory->region();
            for (auto& i : inventory->list(""))
                if (q.include_gone || i.state != CloudInstance::State::gone)
                    m.machines.push_back(std::move(i));
            return m;
        };
    d.collect = [named = Named{d.name}, make](std::vector<GcPool> pools, const GcOptions& o) {
        collect_cloud(named, make, std::move(pools), o);
    };
}

void add_cloud_gc(ProviderDescriptor& d) {
    add_cloud_gc(
        d, [make = d.make_adapter](std::string_view region) -> std::unique_ptr<MachineInventory> {
            return make(region);
        });
}

}  // namespace sky::detail
