// The seed examples on SSH test hosts: every example binary listed in SKY_EXAMPLES_LIST (written
// by CMake from the examples' sky_add_example lines) runs against 2 network namespaces with a
// real sshd, as a user would run it (`--provider ssh --hosts A,B --identity ... --known-hosts
// ...`), and must exit 0 with every output the ctest entry expects on Local, leaving no worker
// behind. Needs root; skipped otherwise.
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "hosts/test_hosts.hpp"

namespace {

struct Example {
    std::string name;
    std::string exe;
    std::vector<std::string> args;
    std::vector<std::string> expect;
};

// Lines "example NAME", "exe PATH", "arg VALUE", "expect REGEX", in that order per example.
std::vector<Example> read_examples(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::vector<Example> list;
    for (std::string line; std::getline(in, line);) {
        const auto space = line.find(' ');
        if (space == std::string::npos) continue;
        const std::string key = line.substr(0, space), value = line.substr(space + 1);
        if (key == "example") {
            list.push_back({value, {}, {}, {}});
        } else if (list.empty()) {
            throw std::runtime_error(path + ": \"" + key + "\" before any example");
        } else if (key == "exe") {
            list.back().exe = value;
        } else if (key == "arg") {
            list.back().args.push_back(value);
        } else if (key == "expect") {
            list.back().expect.push_back(value);
        }
    }
    return list;
}

}  // namespace

TEST_CASE("The seed examples run on 2 SSH test hosts with the output they have on Local") {
    SKIP_WITHOUT_HOSTS();
    const std::vector<Example> examples = read_examples(SKY_EXAMPLES_LIST);
    REQUIRE(examples.size() >= 10);

    sky::test::TestHosts hosts(2);
    const std::string list = hosts.address(0) + "," + hosts.address(1);
    for (const Example& ex : examples) {
        std::vector<std::string> argv{ex.exe};
        argv.insert(argv.end(), ex.args.begin(), ex.args.end());
        for (const char* a : {"--provider", "ssh", "--hosts"}) argv.emplace_back(a);
        argv.insert(argv.end(), {list, "--identity", hosts.client_key_path().string(),
                                 "--known-hosts", hosts.known_hosts_file().string(), "--port",
                                 std::to_string(hosts.port(0)), "--user", hosts.user()});
        const auto start = std::chrono::steady_clock::now();
        const sky::test::CommandResult r = sky::test::run_command(argv, std::chrono::minutes(3));
        const auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
        INFO("example " << ex.name << " (" << secs << " s), output:\n" << r.output);
        CHECK_FALSE(r.timed_out);
        CHECK(r.status == 0);
        CHECK(ex.expect.size() > 0);
        for (const std::string& re : ex.expect) {
            INFO("expected to match: " << re);
            CHECK(std::regex_search(r.output, std::regex(re)));
        }
        // The example's pool tore its nodes down: no worker of it is left on the hosts.
        CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                    std::chrono::seconds(30)));
        std::cout << "example " << ex.name << " on 2 SSH test hosts: exit " << r.status << ", "
                  << secs << " s\n";
    }
}
