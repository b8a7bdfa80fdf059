// Every operator and method on a real Local pool.
#include <catch2/catch.hpp>
#include <set>

#include "e2e/local/functions.hpp"

using namespace e2e;

TEST_CASE(">> runs one call and returns its typed result", "[local][operators]") {
    sky::ComputePool pool{quiet(2)};
    CHECK((sky::compute<add>(2, 3) >> pool) == 5);
    CHECK((sky::compute<mean>(std::vector<double>{1, 2, 3, 6}) >> pool) == 3.0);
    CHECK((sky::compute<concat>("ab", std::string("c"), 2) >> pool) == "abcabc");
    CHECK((sky::compute<scale>(Vec3{1, 2, 3}, 2.0) >> pool) == Vec3{2, 4, 6});
    sky::compute<nothing>() >> pool;  // void
    CHECK(pool.run(sky::compute<add>(1, 1)) == 2);
}

TEST_CASE("| broadcasts to every node, results in node order", "[local][operators]") {
    sky::ComputePool pool{quiet(3)};
    std::vector<int> nodes = sky::compute<node_index>() | pool;
    CHECK(nodes == std::vector<int>{0, 1, 2});
    std::vector<sky::InstanceInfo> infos = sky::compute<info>() | pool;
    REQUIRE(infos.size() == 3);
    std::set<int> seen;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        CHECK(infos[i].node == static_cast<int>(i));
        CHECK(infos[i].total_nodes == 3);
        CHECK(infos[i].is_head == (i == 0));
        CHECK(infos[i].job_id == pool.id());
        CHECK(infos[i].workers_per_node == 1);
        CHECK(infos[i].head_addr == "127.0.0.1");
        seen.insert(infos[i].node);
    }
    CHECK(seen.size() == 3);
    sky::compute<nothing>() | pool;  // void broadcast returns void
    CHECK(pool.broadcast(sky::compute<add>(1, 2)) == std::vector<int>{3, 3, 3});
}

TEST_CASE("& and gather run in parallel with typed results", "[local][operators]") {
    sky::ComputePool pool{quiet(2, 2)};
    auto [a, b, c] = (sky::compute<add>(1, 2) & sky::compute<concat>("x", "y", 1) &
                      sky::compute<mean>(std::vector<double>{2, 4})) >>
                     pool;
    CHECK(a == 3);
    CHECK(b == "xy");
    CHECK(c == 3.0);
    auto [v, n] = (sky::compute<nothing>() & sky::compute<add>(5, 5)) >> pool;
    STATIC_REQUIRE(std::is_same_v<decltype(v), std::monostate>);
    CHECK(n == 10);
    auto [x, y, z] =
        sky::gather(sky::compute<add>(1, 1), sky::compute<add>(2, 2), sky::compute<add>(3, 3)) >>
        pool;
    CHECK(x + y + z == 12);
    auto t = pool.run_batch(sky::compute<add>(0, 1) & sky::compute<add>(0, 2));
    CHECK(std::get<1>(t) == 2);
    // & chains on either side.
    auto [p, q, r, s] = ((sky::compute<add>(1, 0) & sky::compute<add>(2, 0)) &
                         (sky::compute<add>(3, 0) & sky::compute<add>(4, 0))) >>
                        pool;
    CHECK(p + q + r + s == 10);
}

TEST_CASE("gather of a vector returns results in input order", "[local][operators]") {
    sky::ComputePool pool{quiet(3, 2)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 2000; ++i) calls.push_back(sky::compute<add>(i, 1));
    std::vector<int> out = sky::gather(std::move(calls)) >> pool;
    REQUIRE(out.size() == 2000);
    for (int i = 0; i < 2000; ++i) REQUIRE(out[static_cast<std::size_t>(i)] == i + 1);
    std::vector<sky::PendingCompute<int>> none;
    CHECK((sky::gather(std::move(none)) >> pool).empty());
}

TEST_CASE("the work is spread over every node", "[local][operators]") {
    sky::ComputePool pool{quiet(3)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 30; ++i) calls.push_back(sky::compute<node_index>());
    auto nodes = sky::gather(std::move(calls)) >> pool;
    CHECK(std::set<int>(nodes.begin(), nodes.end()).size() == 3);
}

TEST_CASE("submit returns a Future: get, ready, wait_for, cancel", "[local][operators]") {
    sky::ComputePool pool{quiet(1, 2)};
    auto f = pool.submit(sky::compute<add>(20, 22));
    CHECK(f.get() == 42);
    CHECK(f.ready());
    auto slow = pool.submit(sky::compute<sleep_ms>(300));
    CHECK_FALSE(slow.wait_for(std::chrono::milliseconds(1)));
    CHECK(slow.get() == 300);
    auto batch = pool.submit(sky::compute<add>(1, 1) & sky::compute<add>(2, 2));
    CHECK(std::get<1>(batch.get()) == 4);
    std::vector<sky::PendingCompute<int>> v{sky::compute<add>(1, 2), sky::compute<add>(3, 4)};
    auto g = pool.submit(sky::gather(v));
    CHECK(g.get() == std::vector<int>{3, 7});
    // Cancel a call that cannot start yet (both slots are busy).
    auto busy1 = pool.submit(sky::compute<sleep_ms>(400));
    auto busy2 = pool.submit(sky::compute<sleep_ms>(400));
    auto queued = pool.submit(sky::compute<sleep_ms>(5000));
    CHECK(queued.cancel());
    CHECK_THROWS_AS(queued.get(), sky::CancelledError);
    CHECK(busy1.get() + busy2.get() == 800);
}

TEST_CASE("concurrency runs calls at once on one node, each in its own slot",
          "[local][operators]") {
    TempDir d;
    sky::ComputePool pool{quiet(1, 2)};
    auto [w1, w2] =
        (sky::compute<rendezvous>(d.path, "a", "b") & sky::compute<rendezvous>(d.path, "b", "a")) >>
        pool;
    CHECK(w1 != w2);  // two threads of the one worker process
}

TEST_CASE("a large argument and result travel intact", "[local][operators]") {
    sky::ComputePool pool{quiet(1)};
    std::vector<float> big(16 << 20);  // 64 MiB
    for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<float>(i);
    big.back() = 7.0f;
    auto back = sky::compute<echo>(big) >> pool;
    CHECK(back == big);
}

TEST_CASE("PoolSpec::env reaches the worker", "[local][operators]") {
    sky::ComputePool pool{{.nodes = 1,
                           .image = sky::Image{.env = {{"FROM_IMAGE", "img"}}},
                           .env = {{"SKY_TEST_VALUE", "forty two"}},
                           .display = sky::Display::quiet}};
    CHECK((sky::compute<getenv_of>("SKY_TEST_VALUE") >> pool) == "forty two");
    CHECK((sky::compute<getenv_of>("FROM_IMAGE") >> pool) == "img");
    CHECK((sky::compute<getenv_of>("SKY_WORKER_TOKEN") >> pool) == "<unset>");  // never leaked
}

TEST_CASE("pool methods: instances, is_active, close, move", "[local][operators]") {
    sky::ComputePool pool{quiet(2)};
    CHECK(pool.is_active());
    CHECK(pool.instance_count() == 2);
    auto inst = pool.instances();
    REQUIRE(inst.size() == 2);
    CHECK(inst[0].node == 0);
    CHECK(inst[1].provider == "local");
    CHECK(inst[0].id != inst[1].id);
    CHECK(pool.cost() == 0.0);
    sky::ComputePool moved = std::move(pool);
    CHECK((sky::compute<add>(1, 2) >> moved) == 3);
    moved.close();
    CHECK_FALSE(moved.is_active());
    CHECK_THROWS_AS(sky::compute<add>(1, 2) >> moved, sky::Error);
    moved.close();  // twice is fine
}

TEST_CASE("MultiPool provisions pools in parallel", "[local][operators]") {
    sky::MultiPool multi{quiet(1), quiet(2)};
    auto& [a, b] = multi;
    CHECK(multi.size() == 2);
    CHECK(a.instance_count() == 1);
    CHECK(b.instance_count() == 2);
    CHECK((sky::compute<add>(1, 1) >> multi[1]) == 2);
}

TEST_CASE("parameters by const reference, lvalue reference and rvalue reference",
          "[local][operators]") {
    sky::ComputePool pool{quiet(1)};
    std::vector<int> v{1, 2};
    CHECK((sky::compute<by_ref>(std::string("a"), v, std::string("c")) >> pool) == "a3c");
    CHECK(v.size() == 2);  // the remote call changed its own copy
}

TEST_CASE("a Future that outlives its pool can still be asked to cancel", "[local][operators]") {
    std::optional<sky::Future<int>> f;
    {
        sky::ComputePool pool{quiet(1)};
        f = pool.submit(sky::compute<add>(1, 2));
        CHECK(f->get() == 3);
    }
    CHECK_FALSE(f->cancel());
    CHECK(f->ready());
}
