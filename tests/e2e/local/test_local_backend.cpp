// sky::Local's backend on its own: a node added after provision() starts a real worker process,
// a released one is stopped (its process reaped, recorded gone in the ledger), and its index can
// be added again.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "ledger/ledger.hpp"
#include "pool/backend.hpp"
#include "pool/backend_factory.hpp"
#include "providers/local/provider.hpp"
#include "support/temp_home.hpp"

using namespace sky::detail;

namespace {
/// The ids the ledger records as instances, and as gone.
std::pair<std::set<std::string>, std::set<std::string>> ledger_ids(
    const std::filesystem::path& file) {
    std::set<std::string> live, gone;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("type")) continue;
        if (j["type"] == "instance") live.insert(j["id"].get<std::string>());
        if (j["type"] == "gone") gone.insert(j["id"].get<std::string>());
    }
    return {live, gone};
}
}  // namespace

TEST_CASE("Local: a node added after provision starts a worker, a released one is stopped",
          "[local][elastic]") {
    sky::test::TempSkyHome home;
    sky::PoolSpec spec;
    spec.nodes = 1;
    const std::string pool_id = "00112233445566aa";
    auto ledger = Ledger::open(pool_id, "local", "");
    auto backend = local_provider().make_backend(BackendContext{spec, pool_id, ledger.get()});
    const auto emit = [](sky::Event) {};
    backend->provision(1, emit);
    CHECK_THROWS_AS(backend->connect(1, emit), std::out_of_range);  // not added yet
    backend->add({1}, emit);
    auto s = backend->connect(1, emit);
    CHECK(s.instance.node == 1);
    REQUIRE(s.stream);
    const auto file = home.pools() / (pool_id + ".jsonl");
    auto [live, gone] = ledger_ids(file);
    REQUIRE(live.size() == 1);
    const std::string id = *live.begin();  // "local-<pid>"
    const int pid = std::stoi(id.substr(6));
    CHECK(::kill(pid, 0) == 0);
    backend->release(1);
    // Reaped (no zombie either) and recorded gone.
    CHECK(::kill(pid, 0) != 0);
    std::tie(live, gone) = ledger_ids(file);
    CHECK(gone.count(id) == 1);
    CHECK(backend->exit_reason(1).detail == "the worker was never started");
    // The index comes back as a fresh node: a new worker, a new instance id.
    backend->add({1}, emit);
    auto again = backend->connect(1, emit);
    CHECK(again.instance.id != s.instance.id);
    CHECK(again.instance.node == 1);
    CHECK_THROWS_AS(backend->add({-1}, emit), sky::ConfigError);
    backend->stop_all();
    std::tie(live, gone) = ledger_ids(file);
    CHECK(live == gone);  // every worker started is recorded gone
    ledger->close();
}
