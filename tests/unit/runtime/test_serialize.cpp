// Serialization: what travels comes back equal; the buffer grows in place.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "runtime/owned_result.hpp"
#include "sky/compute.hpp"
#include "sky/detail/serialize.hpp"

namespace {
struct Point {
    double x = 0, y = 0;
    std::string label;
    template <class A>
    void serialize(A& ar) {
        ar(x, y, label);
    }
    bool operator==(const Point&) const = default;
};
struct NotSerializable {
    int* p = nullptr;
};
Point mid(Point a, Point b) { return {(a.x + b.x) / 2, (a.y + b.y) / 2, a.label + b.label}; }
}  // namespace

using sky::detail::Buffer;

TEST_CASE("values round trip through cereal into a Buffer", "[serialize]") {
    Buffer b;
    std::vector<float> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
    std::map<std::string, int> m{{"a", 1}, {"b", 2}};
    std::optional<int> o = 5;
    std::variant<int, std::string> var = std::string("x");
    std::tuple<int, double> t{1, 2.5};
    Point p{1, 2, "p"};
    sky::detail::save_to(b, v, m, o, var, t, p);
    std::vector<float> v2;
    std::map<std::string, int> m2;
    std::optional<int> o2;
    std::variant<int, std::string> var2;
    std::tuple<int, double> t2;
    Point p2;
    sky::detail::load_from(b.span(), v2, m2, o2, var2, t2, p2);
    CHECK(v2 == v);
    CHECK(m2 == m);
    CHECK(o2 == o);
    CHECK(var2 == var);
    CHECK(t2 == t);
    CHECK(p2 == p);
}

TEST_CASE("reading past the end throws, never reads out of bounds", "[serialize]") {
    Buffer b;
    sky::detail::save_to(b, std::string("hello"));
    std::string s;
    auto cut = b.span().subspan(0, b.size() - 2);
    CHECK_THROWS(sky::detail::load_from(cut, s));
}

TEST_CASE("Buffer grows, moves and consumes", "[serialize]") {
    Buffer b;
    for (int i = 0; i < 100000; ++i) b.append(&i, sizeof i);
    CHECK(b.size() == 100000 * sizeof(int));
    int x = 0;
    std::memcpy(&x, b.data() + 4 * 99999, 4);
    CHECK(x == 99999);
    b.consume(4);
    std::memcpy(&x, b.data(), 4);
    CHECK(x == 1);
    Buffer c = std::move(b);
    CHECK(b.size() == 0);
    CHECK(c.size() == 99999 * sizeof(int));
}

TEST_CASE("the serializable concept", "[serialize]") {
    STATIC_REQUIRE(sky::serializable<std::vector<std::string>>);
    STATIC_REQUIRE(sky::serializable<Point>);
    STATIC_REQUIRE(sky::serializable<std::optional<std::map<int, std::vector<double>>>>);
    STATIC_REQUIRE_FALSE(sky::serializable<NotSerializable>);
}

TEST_CASE("a PendingCompute carries encoded arguments and is itself serializable", "[serialize]") {
    auto p = sky::compute<mid>(Point{0, 0, "a"}, Point{2, 4, "b"})
                 .retries(2)
                 .at_most_once()
                 .timeout(std::chrono::seconds(3));
    CHECK(p.function_name().find("mid") != std::string_view::npos);
    Buffer b;
    sky::detail::save_to(b, p);
    sky::PendingCompute<Point> q;
    sky::detail::load_from(b.span(), q);
    CHECK(q.function_name() == p.function_name());
    CHECK(q.desc().signature == p.desc().signature);
    CHECK(q.desc().options.retries == 2);
    CHECK(q.desc().options.at_most_once);
    CHECK(q.desc().options.timeout == std::chrono::milliseconds(3000));
    REQUIRE(q.desc().args->size() == p.desc().args->size());
    CHECK(std::memcmp(q.desc().args->data(), p.desc().args->data(), p.desc().args->size()) == 0);
    // .local runs here with no serialization.
    CHECK(sky::compute<mid>.local(Point{0, 0, "a"}, Point{2, 4, "b"}) == Point{1, 2, "ab"});
}

TEST_CASE("vectors of numbers load in place when aligned, through cereal otherwise",
          "[serialize]") {
    std::vector<double> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / 3;
    Buffer b;
    sky::detail::save_to(b, v, std::string("tail"));
    std::vector<double> out;
    std::string tail;
    sky::detail::load_each(b.span(), out, tail);  // aligned: the fast path
    CHECK(out == v);
    CHECK(tail == "tail");
    Buffer shifted;  // the same bytes one byte off alignment: cereal's path
    shifted.push_back(std::byte{0});
    shifted.append(b.data(), b.size());
    std::vector<double> out2;
    std::string tail2;
    sky::detail::load_each(shifted.span().subspan(1), out2, tail2);
    CHECK(out2 == v);
    CHECK(tail2 == "tail");
    // A count that claims more than the bytes hold is refused, never read past the end.
    Buffer lying;
    std::uint64_t n = 1u << 30;
    lying.append(&n, 8);
    lying.append(v.data(), 64);
    std::vector<double> bad;
    CHECK_THROWS(sky::detail::load_each(lying.span(), bad));
}

TEST_CASE("a large result of numbers is handed over to the worker, a small one copied",
          "[serialize]") {
    using sky::detail::take_owned_result;
    // Small: copied into the buffer as save_to writes it, nothing handed over.
    std::vector<float> small(100, 1.5f);
    Buffer a;
    sky::detail::save_result(a, small);
    CHECK(take_owned_result(a).empty());
    std::vector<float> back;
    sky::detail::load_each(a.span(), back);
    CHECK(back == small);
    CHECK(small.size() == 100);  // a copy: the caller's vector is untouched
    // Large: the buffer gets the count; the elements stay in the moved vector, which lives as
    // long as what take_owned_result returns.
    std::vector<float> big(sky::detail::owned_result_bytes / sizeof(float) + 1);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
    const std::vector<float> want = big;
    const float* elements = big.data();
    Buffer b;
    b.resize(24);  // a frame header's room, as the executor leaves it
    sky::detail::save_result(b, big);
    REQUIRE(b.size() == 24 + 8);
    auto tail = take_owned_result(b);
    REQUIRE(tail.size() == want.size() * sizeof(float));
    CHECK(reinterpret_cast<const float*>(tail.span().data()) == elements);  // not copied
    Buffer wire;
    wire.append(b.data() + 24, 8);
    wire.append(tail.span().data(), tail.size());
    std::vector<float> got;
    sky::detail::load_each(wire.span(), got);
    CHECK(got == want);
    CHECK(take_owned_result(b).empty());  // taken once
    // Handed over for another buffer, or with bytes appended after it: never taken silently.
    Buffer c, other;
    std::vector<double> big2(sky::detail::owned_result_bytes / sizeof(double));
    sky::detail::save_result(c, big2);
    CHECK(take_owned_result(other).empty());
    CHECK(take_owned_result(c).empty());  // dropped by the look-up for `other`
    std::vector<double> big3(sky::detail::owned_result_bytes / sizeof(double));
    sky::detail::save_result(c, big3);
    c.push_back(std::byte{1});
    CHECK_THROWS_AS(take_owned_result(c), std::logic_error);
}

TEST_CASE("a large result's vector, once written, serves the next large argument of its type",
          "[serialize]") {
    using sky::detail::take_owned_result;
    const std::size_t n = (std::size_t{4} << 20) / sizeof(float);  // 4 MiB: load_one's fresh path
    auto hand_over = [](std::vector<float> v) {
        Buffer b;
        sky::detail::save_result(b, v);
        return take_owned_result(b);  // destroying it retires the vector
    };
    std::vector<float> result(n, 1.0f);
    const float* memory = result.data();
    hand_over(std::move(result));  // written and done with: kept as the spare
    Buffer arg;
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<float>(i);
    sky::detail::save_to(arg, want);
    std::vector<float> got;
    sky::detail::load_each(arg.span(), got);
    CHECK(got == want);
    CHECK(got.data() == memory);  // the kept vector's memory, already faulted in
    // Taken once: the next decode allocates afresh; another element type never takes it.
    std::vector<float> again;
    sky::detail::load_each(arg.span(), again);
    CHECK(again == want);
    CHECK(again.data() != memory);
    std::vector<float> other(3 * n);  // 12 MiB
    const float* other_memory = other.data();
    hand_over(std::move(other));
    Buffer doubles;
    sky::detail::save_to(doubles, std::vector<double>(n, 2.0));  // 8 MiB, another type
    std::vector<double> d;
    sky::detail::load_each(doubles.span(), d);
    CHECK(static_cast<const void*>(d.data()) != static_cast<const void*>(other_memory));
    // Nor an argument of less than half its size (that memory would stay with the user's code).
    Buffer small;
    sky::detail::save_to(small, std::vector<float>(n + 1024, 3.0f));  // 4 MiB and a bit
    std::vector<float> s;
    sky::detail::load_each(small.span(), s);
    CHECK(s.data() != other_memory);
    CHECK(s.size() == n + 1024);
    Buffer fits;
    std::vector<float> eight(2 * n, 4.0f);  // 8 MiB
    sky::detail::save_to(fits, eight);
    std::vector<float> f;
    sky::detail::load_each(fits.span(), f);
    CHECK(f.data() == other_memory);
    CHECK(f == eight);
}
