// sky::map and pool.as_completed (api.md §2a) on a real Local pool: order, chunking, errors,
// retries, timeouts, submit, results as they arrive, cancellation, serialization.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cereal/details/helpers.hpp>  // cereal::Exception: what the bounded decoder throws
#include <fstream>
#include <iostream>
#include <list>
#include <mutex>
#include <numeric>
#include <ranges>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "e2e/local/functions.hpp"

namespace map_test {

long square(long x) { return x * x; }
std::string shout(const std::string& s, int times, std::string suffix) {
    std::string out;
    for (int i = 0; i < times; ++i) out += s;
    return out + suffix;
}
bool negate(bool b) { return !b; }

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}
void touch_file(const std::string& path) { std::ofstream(path) << "x"; }

// A void function: leaves a file per element, so the test sees that each one ran.
void mark(int x, std::string dir) { touch_file(dir + "/" + std::to_string(x)); }

// Records that element x ran, then throws for `bad`.
int record_or_throw(int x, std::string dir, int bad) {
    touch_file(dir + "/" + std::to_string(x));
    if (x == bad) {
        std::cout << "element " << x << " is about to fail" << std::endl;
        throw std::invalid_argument("bad element " + std::to_string(x));
    }
    return x * 2;
}

// Element 5 kills its worker process once: the first call to create `marker` aborts.
int die_once(int x, std::string marker) {
    if (x == 5) {
        int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd >= 0) {
            ::close(fd);
            std::abort();
        }
    }
    return x * 10;
}

// Returns p.first once the client has seen result p.second (the test's loop creates
// "<index>.seen" for each result it receives); p.second < 0: at once. This makes the order in
// which results arrive known without any timing.
int after_seen(std::pair<int, int> p, std::string dir) {
    if (p.second >= 0) {
        const std::string f = dir + "/" + std::to_string(p.second) + ".seen";
        for (int i = 0; !exists(f); ++i) {
            if (i >= 6000) throw std::runtime_error("the client never saw result " + f);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    return p.first;
}
std::string name_after_seen(int wait_for, std::string dir, std::string name) {
    after_seen({0, wait_for}, dir);
    return name;
}

// Counts its calls in a file (one line each, appended atomically) and takes a while.
int counted(int x, std::string dir) {
    int fd = ::open((dir + "/calls").c_str(), O_CREAT | O_APPEND | O_WRONLY, 0600);
    if (fd >= 0) {
        std::string line = std::to_string(x) + "\n";
        (void)!::write(fd, line.data(), line.size());
        ::close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return x;
}

std::size_t lines_in(const std::string& path) {
    std::ifstream in(path);
    std::size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
}

}  // namespace map_test

using namespace e2e;
using namespace map_test;

// The range pool.as_completed returns is a standard input range.
static_assert(std::ranges::input_range<sky::Completions<long>>);
static_assert(std::ranges::input_range<sky::Completions<void>>);

namespace {
std::vector<long> iota_long(long n) {
    std::vector<long> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), 0L);
    return v;
}
std::vector<long> squares(long n) {
    std::vector<long> v;
    for (long i = 0; i < n; ++i) v.push_back(i * i);
    return v;
}
}  // namespace

TEST_CASE("map returns one result per element in input order for every chunk size",
          "[local][map]") {
    sky::ComputePool pool{quiet(2, 2)};
    const auto rows = iota_long(50);
    CHECK((sky::map<square>(rows) >> pool) == squares(50));  // the pool's chunk size
    for (std::size_t chunk : {1u, 3u, 7u, 50u, 1000u}) {
        INFO("chunk " << chunk);
        CHECK((sky::map<square>(rows).chunk(chunk) >> pool) == squares(50));
    }
    // Any sized range; elements converted to F's parameter type.
    std::list<int> list{1, 2, 3};
    CHECK((sky::map<square>(list) >> pool) == std::vector<long>{1, 4, 9});
    CHECK((sky::map<square>(std::views::iota(0, 20)).chunk(6) >> pool) == squares(20));
    std::array<long, 4> arr{5, 6, 7, 8};
    CHECK((sky::map<square>(arr) >> pool) == std::vector<long>{25, 36, 49, 64});
    std::vector<bool> bits{true, false, false, true};
    CHECK((sky::map<negate>(bits).chunk(3) >> pool) == std::vector<bool>{false, true, true, false});
    // Elements of a user type.
    std::vector<Vec3> vs{{1, 2, 3}, {4, 5, 6}};
    CHECK((sky::map<scale>(vs, 2.0) >> pool) == std::vector<Vec3>{{2, 4, 6}, {8, 10, 12}});
    // The same map, run here.
    CHECK(sky::map<square>.local(rows) == squares(50));
}

TEST_CASE("map of an empty range returns an empty result and runs nothing", "[local][map]") {
    sky::ComputePool pool{quiet(1)};
    CHECK((sky::map<square>(std::vector<long>{}) >> pool).empty());
    TempDir dir;
    sky::map<mark>(std::vector<int>{}, dir.path) >> pool;
    CHECK(pool.submit(sky::map<square>(std::vector<long>{})).get().empty());
    int n = 0;
    for (auto& done : pool.as_completed(sky::map<square>(std::vector<long>{}))) {
        (void)done;
        ++n;
    }
    CHECK(n == 0);
    CHECK_FALSE(exists(dir.path + "/0"));  // mark never ran
}

TEST_CASE("map of a void function runs it for every element and returns void", "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    TempDir dir;
    std::vector<int> xs(30);
    std::iota(xs.begin(), xs.end(), 0);
    static_assert(std::is_void_v<decltype(sky::map<mark>(xs, dir.path) >> pool)>);
    sky::map<mark>(xs, dir.path).chunk(4) >> pool;
    for (int x : xs) CHECK(exists(dir.path + "/" + std::to_string(x)));
}

TEST_CASE("map passes the fixed arguments to every element", "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    std::vector<std::string> words{"a", "bc", "d"};
    CHECK((sky::map<shout>(words, 2, std::string("!")).chunk(2) >> pool) ==
          std::vector<std::string>{"aa!", "bcbc!", "dd!"});
    // A fixed argument taken by non-const reference is a fresh copy for every element: by_ref
    // appends to its vector, and each element sees the original one (size 1 + 1), whatever
    // the chunk.
    std::vector<int> seed{7};
    CHECK((sky::map<by_ref>(words, seed, std::string("?")).chunk(3) >> pool) ==
          std::vector<std::string>{"a2?", "bc2?", "d2?"});
}

TEST_CASE("an element that throws is a RemoteError naming its index, and every other chunk ran",
          "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    TempDir dir;
    std::vector<int> xs(40);
    std::iota(xs.begin(), xs.end(), 0);
    try {
        sky::map<record_or_throw>(xs, dir.path, 17).chunk(4) >> pool;
        FAIL("no exception");
    } catch (const sky::RemoteError& e) {
        CHECK(e.function() == "map_test::record_or_throw");
        CHECK(e.type_name() == "std::invalid_argument");
        CHECK(e.message() == "element 17: bad element 17");
        CHECK(std::string(e.what()).find("element 17") != std::string::npos);
        CHECK((e.node() == 0 || e.node() == 1));
        CHECK(e.instance_id() == pool.instances()[static_cast<std::size_t>(e.node())].id);
        REQUIRE_FALSE(e.remote_log().empty());
        CHECK(e.remote_log().back() == "element 17 is about to fail");
    }
    // Every element ran, those of the failing chunk too.
    for (int x : xs) CHECK(exists(dir.path + "/" + std::to_string(x)));
    // The first failure in input order is the one rethrown.
    CHECK_THROWS_WITH(sky::map<throw_invalid>(std::vector<int>{3, 4, 5}).chunk(1) >> pool,
                      Catch::Contains("element 0: bad x: 3"));
    // submit and as_completed give each element its own outcome.
    auto f = pool.submit(sky::map<record_or_throw>(xs, dir.path, 30));
    CHECK_THROWS_WITH(f.get(), Catch::Contains("element 30"));
    int ok = 0, failed = 0;
    for (auto& done : pool.as_completed(sky::map<record_or_throw>(xs, dir.path, 9).chunk(5))) {
        if (done.index == 9) {
            CHECK(done.failed());
            CHECK_THROWS_AS(done.get(), sky::RemoteError);
            ++failed;
        } else {
            CHECK(done.get() == 2 * static_cast<int>(done.index));
            ++ok;
        }
    }
    CHECK(ok == 39);
    CHECK(failed == 1);
}

TEST_CASE("map .retries(1) re-runs the chunks of a node lost mid-map", "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    std::mutex m;
    int lost = 0;
    pool.on<sky::ErrorEvent>([&](const sky::ErrorEvent& e) {
        std::lock_guard lk(m);
        if (e.message.find(" lost") != std::string::npos) ++lost;
    });
    TempDir dir;
    std::vector<int> xs(20);
    std::iota(xs.begin(), xs.end(), 0);
    std::vector<int> want;
    for (int x : xs) want.push_back(x * 10);
    const std::string marker = dir.path + "/died";
    CHECK((sky::map<die_once>(xs, marker).chunk(2).retries(1) >> pool) == want);
    CHECK(exists(marker));  // element 5 did kill its worker once
    bool seen = false;
    for (int i = 0; i < 50 && !seen; ++i) {
        {
            std::lock_guard lk(m);
            seen = lost >= 1;
        }
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(seen);
    // Without retries the lost chunk fails the map.
    CHECK_THROWS_AS(sky::map<die_once>(xs, dir.path + "/died-again").chunk(2) >> pool,
                    sky::NodeLostError);
}

TEST_CASE("map .timeout applies to each chunk", "[local][map]") {
    sky::ComputePool pool{quiet(1, 2)};
    CHECK_THROWS_AS(sky::map<sleep_ms>(std::vector<int>{10, 5000})
                            .chunk(1)
                            .timeout(std::chrono::milliseconds(300)) >>
                        pool,
                    sky::TimeoutError);
    CHECK((sky::map<sleep_ms>(std::vector<int>{1, 2, 3}).timeout(std::chrono::seconds(30)) >>
           pool) == std::vector<int>{1, 2, 3});
    CHECK_THROWS_AS(sky::map<square>(std::vector<long>{1}).chunk(0), sky::ConfigError);
}

TEST_CASE("pool.submit of a map returns a Future of the whole result", "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    sky::Future<std::vector<long>> f = pool.submit(sky::map<square>(iota_long(100)).chunk(9));
    TempDir dir;
    sky::Future<void> g = pool.submit(sky::map<mark>(std::vector<int>{1, 2}, dir.path));
    CHECK(f.get() == squares(100));
    g.get();
    CHECK(exists(dir.path + "/1"));
    CHECK(exists(dir.path + "/2"));
}

TEST_CASE("as_completed delivers each result once, in the order results arrive", "[local][map]") {
    // Four slots, so every chunk below runs at once; each waits until the client has seen
    // another result, which fixes the order in which they can arrive.
    sky::ComputePool pool{quiet(2, 2)};
    TempDir dir;
    auto seen = [&](std::size_t index, const std::string& tag) {
        touch_file(dir.path + "/" + tag + std::to_string(index) + ".seen");
    };
    SECTION("a map, one element per chunk") {
        std::vector<std::pair<int, int>> els{{0, 1}, {1, 2}, {2, 3}, {3, -1}};
        std::vector<std::size_t> order;
        for (auto& done : pool.as_completed(sky::map<after_seen>(els, dir.path).chunk(1))) {
            CHECK(done.get() == static_cast<int>(done.index));
            order.push_back(done.index);
            seen(done.index, "");
        }
        CHECK(order == std::vector<std::size_t>{3, 2, 1, 0});
    }
    SECTION("a map, elements delivered chunk by chunk as each chunk arrives") {
        // Chunks [0, 1] and [2, 3]; element 0 waits for element 2.
        std::vector<std::pair<int, int>> els{{0, 2}, {1, -1}, {2, -1}, {3, -1}};
        std::vector<std::size_t> order;
        for (auto& done : pool.as_completed(sky::map<after_seen>(els, dir.path).chunk(2))) {
            CHECK(done.get() == static_cast<int>(done.index));
            order.push_back(done.index);
            seen(done.index, "");
        }
        CHECK(order == std::vector<std::size_t>{2, 3, 0, 1});
    }
    SECTION("a gather") {
        std::vector<sky::PendingCompute<int>> calls;
        for (auto [i, w] : std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, -1}})
            calls.push_back(sky::compute<after_seen>(std::pair{i, w}, dir.path));
        std::vector<std::size_t> order;
        for (auto& done : pool.as_completed(sky::gather(calls))) {
            CHECK(done.get() == static_cast<int>(done.index));
            order.push_back(done.index);
            seen(done.index, "");
        }
        CHECK(order == std::vector<std::size_t>{2, 1, 0});
    }
    SECTION("a batch of different types: a variant whose alternative is the member") {
        auto batch = sky::compute<after_seen>(std::pair{7, 1}, dir.path) &
                     sky::compute<name_after_seen>(-1, dir.path, std::string("one")) &
                     sky::compute<nothing>();
        std::vector<std::size_t> order;
        auto results = pool.as_completed(batch);
        CHECK(results.size() == 3);
        for (auto& done : results) {
            auto& v = done.get();
            CHECK(v.index() == done.index);
            if (done.index == 0) CHECK(std::get<0>(v) == 7);
            if (done.index == 1) CHECK(std::get<1>(v) == "one");
            order.push_back(done.index);
            seen(done.index, "");
        }
        std::set<std::size_t> once(order.begin(), order.end());
        CHECK(once == std::set<std::size_t>{0, 1, 2});
        CHECK(order.size() == 3);
        // Member 0 waits for member 1.
        CHECK(std::find(order.begin(), order.end(), 1) < std::find(order.begin(), order.end(), 0));
    }
    SECTION("a larger map: every index exactly once") {
        std::vector<long> xs = iota_long(500);
        std::vector<int> count(500, 0);
        for (auto& done : pool.as_completed(sky::map<square>(xs).chunk(7))) {
            REQUIRE(done.index < 500);
            CHECK(done.get() == static_cast<long>(done.index * done.index));
            ++count[done.index];
        }
        CHECK(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));
    }
}

TEST_CASE("leaving an as_completed loop early cancels what has not run", "[local][map]") {
    TempDir dir;
    const std::string calls = dir.path + "/calls";
    {
        // One slot: without cancellation the 200 calls (20 ms each) would all run before the
        // call that follows the loop.
        sky::ComputePool pool{quiet(1)};
        std::vector<int> xs(200);
        std::iota(xs.begin(), xs.end(), 0);
        std::size_t delivered = 0;
        for (auto& done : pool.as_completed(sky::map<counted>(xs, dir.path).chunk(1))) {
            CHECK(done.get() == static_cast<int>(done.index));
            ++delivered;
            break;
        }
        CHECK(delivered == 1);
        CHECK((sky::compute<add>(1, 2) >> pool) == 3);
        const std::size_t ran = lines_in(calls);
        INFO(ran << " of 200 calls ran");
        CHECK(ran >= 1);
        CHECK(ran < 20);
    }
    // Nothing cancelled ran later either (the pool is gone now).
    CHECK(lines_in(calls) < 20);
}

TEST_CASE("after an explicit cancel, as_completed delivers the rest as CancelledError",
          "[local][map]") {
    sky::ComputePool pool{quiet(1)};
    TempDir dir;
    std::vector<int> xs(50);
    std::iota(xs.begin(), xs.end(), 0);
    auto results = pool.as_completed(sky::map<counted>(xs, dir.path).chunk(1));
    CHECK(results.size() == 50);
    std::vector<int> count(50, 0);
    std::size_t cancelled = 0, ok = 0;
    for (auto& done : results) {
        REQUIRE(done.index < 50);
        ++count[done.index];
        if (!done.failed()) {
            CHECK(done.get() == static_cast<int>(done.index));
            ++ok;
        } else {
            CHECK_THROWS_AS(done.get(), sky::CancelledError);
            ++cancelled;
        }
        if (ok == 1 && cancelled == 0) CHECK(results.cancel());
    }
    CHECK(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));
    CHECK(ok + cancelled == 50);
    CHECK(cancelled >= 40);
    CHECK_FALSE(results.cancel());  // nothing left to cancel
}

TEST_CASE("a PendingMap is a serializable value", "[local][map]") {
    sky::ComputePool pool{quiet(2)};
    std::vector<std::string> words{"x", "yz", "", "w"};
    auto m = sky::map<shout>(words, 3, std::string("."))
                 .chunk(3)
                 .retries(2)
                 .at_most_once()
                 .timeout(std::chrono::seconds(40));
    sky::detail::Buffer bytes;
    sky::detail::save_to(bytes, m);
    sky::PendingMap<std::string> back;
    sky::detail::load_from(bytes.span(), back);
    CHECK(back.size() == 4);
    CHECK(back.chunk_size() == 3);
    CHECK(back.function_name() == "map_test::shout");
    CHECK(back.desc().options.retries == 2);
    CHECK(back.desc().options.timeout == std::chrono::milliseconds(40000));
    CHECK(back.desc().options.at_most_once);
    CHECK((back >> pool) == std::vector<std::string>{"xxx.", "yzyzyz.", ".", "www."});
    // Elements of one size (numbers) travel without offsets.
    auto n = sky::map<square>(iota_long(10));
    sky::detail::Buffer nb;
    sky::detail::save_to(nb, n);
    sky::PendingMap<long> nback;
    sky::detail::load_from(nb.span(), nback);
    CHECK((nback >> pool) == squares(10));
    // Bytes that do not describe a map are refused, never run.
    sky::detail::Buffer cut;
    cut.append(bytes.data(), bytes.size() - 3);
    sky::PendingMap<std::string> bad;
    CHECK_THROWS_AS(sky::detail::load_from(cut.span(), bad), cereal::Exception);
    // Fields as PendingMap::save writes them, with offsets that do not fit, or another name.
    auto forged = [](std::string name, std::uint64_t count, std::uint64_t stride,
                     std::vector<std::uint64_t> offsets, std::uint64_t element_bytes) {
        sky::detail::Buffer b;
        sky::detail::save_to(b, name, std::uint64_t{1}, 0, std::int64_t{-1}, std::uint64_t{0},
                             count, stride, offsets, false, element_bytes);
        std::string elements(element_bytes, 'x');
        b.append(elements.data(), elements.size());
        sky::detail::save_to(b, std::uint64_t{0});
        sky::PendingMap<long> m;
        sky::detail::load_from(b.span(), m);
        return m;
    };
    CHECK(forged("sky::map<a::f>", 2, 0, {0, 3, 5}, 5).size() == 2);  // the control: accepted
    CHECK_THROWS_AS(forged("sky::map<a::f>", 5, 0, {0, 1}, 1), cereal::Exception);
    CHECK_THROWS_AS(forged("sky::map<a::f>", ~std::uint64_t{0}, 0, {}, 0), cereal::Exception);
    CHECK_THROWS_AS(forged("sky::map<a::f>", 2, 0, {0, 4, 3}, 3), cereal::Exception);
    CHECK_THROWS_AS(forged("sky::map<a::f>", 3, 8, {}, 16), cereal::Exception);
    CHECK_THROWS_AS(forged("a::f", 2, 0, {0, 3, 5}, 5), cereal::Exception);
}
