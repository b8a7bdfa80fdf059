// Serialization: what travels comes back equal; the buffer grows in place.
#include <catch2/catch.hpp>
// cereal's own archive is the reference the wire format is checked against.
#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/chrono.hpp>
#include <cereal/types/complex.hpp>
#include <cereal/types/deque.hpp>
#include <cereal/types/list.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/memory.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/set.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/unordered_map.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/variant.hpp>
#include <cereal/types/vector.hpp>
#include <complex>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
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
/// Written with save/load members, a free serialize, cereal's helpers and a base class.
struct Split {
    int a = 0;
    std::string b;
    template <class A>
    void save(A& ar) const {
        ar(cereal::make_nvp("a", a), b);
    }
    template <class A>
    void load(A& ar) {
        ar(cereal::make_nvp("a", a), b);
    }
    bool operator==(const Split&) const = default;
};
struct Derived : Point {
    std::uint16_t extra = 0;
    template <class A>
    void serialize(A& ar) {
        ar(cereal::base_class<Point>(this), extra);
    }
    bool operator==(const Derived&) const = default;
};
struct Free {
    double v = 0;
    bool operator==(const Free&) const = default;
};
template <class A>
void serialize(A& ar, Free& f) {
    ar(f.v);
}
/// serialize kept private, reached by cereal::access as cereal's documentation shows.
class Private {
public:
    Private() = default;
    explicit Private(int v) : v_(v) {}
    bool operator==(const Private&) const = default;

private:
    friend class cereal::access;
    template <class A>
    void serialize(A& ar) {
        ar(v_);
    }
    int v_ = 0;
};
/// Versioned, as member and as free functions: cereal writes each type's version once.
struct Versioned {
    int v = 0;
    std::uint32_t seen = 99;  // the version its serialize was given (not sent)
    template <class A>
    void serialize(A& ar, const std::uint32_t version) {
        seen = version;
        ar(v);
    }
    bool operator==(const Versioned& o) const { return v == o.v; }
};
struct FreeVersioned {
    std::string s;
    bool operator==(const FreeVersioned&) const = default;
};
template <class A>
void save(A& ar, const FreeVersioned& f, const std::uint32_t) {
    ar(f.s);
}
template <class A>
void load(A& ar, FreeVersioned& f, const std::uint32_t version) {
    ar(f.s);
    f.s += "@" + std::to_string(version);
}
enum class Colour : std::uint8_t { red = 1, blue = 7 };
struct NotSerializable {
    int* p = nullptr;
};
Point mid(Point a, Point b) { return {(a.x + b.x) / 2, (a.y + b.y) / 2, a.label + b.label}; }
}  // namespace

// sky's archives read sky::class_version; cereal's (the byte-for-byte comparison below) read
// CEREAL_CLASS_VERSION: a type that travels both ways sets both.
CEREAL_CLASS_VERSION(Versioned, 3)
template <>
inline constexpr std::uint32_t sky::class_version<Versioned> = 3;

using sky::detail::Buffer;

TEST_CASE("values round trip through sky's archives into a Buffer", "[serialize]") {
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

TEST_CASE("vectors of numbers load in place when aligned, through the archive otherwise",
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
    Buffer shifted;  // the same bytes one byte off alignment: the archive's path
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

// A std::allocator look-alike of another type: its vectors take the header's templates, not
// libsky's compiled ones.
template <class T>
struct OtherAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = OtherAllocator<U>;
    };
    OtherAllocator() = default;
    template <class U>
    OtherAllocator(const OtherAllocator<U>&) noexcept {}
};

template <class E, class A>
void vector_of_numbers_round_trips() {
    std::vector<E, A> v;
    for (int i = 0; i < 100; ++i) v.push_back(static_cast<E>(i % 100));
    Buffer b;
    sky::detail::save_to(b, v, std::int32_t{7});
    std::vector<E, A> back;
    std::int32_t tail = 0;
    sky::detail::load_each(b.span(), back, tail);
    CHECK(back == v);
    CHECK(tail == 7);
    // A result: copied when small (the hand-over of a large one has its own test).
    std::vector<E, A> result = v;
    Buffer r;
    sky::detail::save_result(r, result);
    std::vector<E, A> again;
    sky::detail::load_each(r.span(), again);
    CHECK(again == v);
}

TEMPLATE_TEST_CASE("a vector of any standard number type travels (libsky's compiled decoding)",
                   "[serialize]", char, signed char, unsigned char, wchar_t, char8_t, char16_t,
                   char32_t, short, unsigned short, int, unsigned int, long, unsigned long,
                   long long, unsigned long long, float, double, long double) {
    vector_of_numbers_round_trips<TestType, std::allocator<TestType>>();
    vector_of_numbers_round_trips<TestType, OtherAllocator<TestType>>();
}

TEST_CASE("a private serialize (friend cereal::access) and versioned ones travel as with cereal",
          "[serialize]") {
    const Private pr{41};
    const std::vector<Versioned> vs{{1}, {2}};
    const FreeVersioned fv{"f"};
    std::ostringstream os;
    {
        cereal::BinaryOutputArchive ar(os);
        ar(pr, vs, fv);
    }
    const std::string theirs = os.str();
    Buffer ours;
    sky::detail::save_to(ours, pr, vs, fv);
    REQUIRE(ours.size() == theirs.size());
    CHECK(std::memcmp(ours.data(), theirs.data(), theirs.size()) == 0);
    Private pr2;
    std::vector<Versioned> vs2;
    FreeVersioned fv2;
    sky::detail::load_from(ours.span(), pr2, vs2, fv2);
    CHECK(pr2 == pr);
    REQUIRE(vs2 == vs);
    CHECK(vs2[0].seen == 3);  // sky::class_version's, read once, given to every element
    CHECK(vs2[1].seen == 3);
    CHECK(fv2.s == "f@0");  // no sky::class_version: 0
    static_assert(sky::serializable<Private>);
    static_assert(sky::serializable<Versioned>);
}

TEST_CASE("sky's archives write byte for byte what cereal's binary archive writes, and read it",
          "[serialize]") {
    std::vector<bool> vb{true, false, true};
    std::vector<std::array<int, 3>> va{{1, 2, 3}, {4, 5, 6}};
    std::vector<std::vector<std::string>> vvs{{"a", "b"}, {}, {"c"}};
    std::deque<int> dq{1, 2, 3};
    std::list<std::string> ls{"x", "yz"};
    std::map<std::string, int> m{{"a", 1}, {"b", 2}};
    std::unordered_map<int, double> um{{3, 0.5}};
    std::set<int> st{5, 1, 3};
    std::optional<int> some = 4, none;
    std::variant<int, std::string, std::monostate> var = std::string("v");
    std::tuple<int, double, std::string> tup{1, 2.5, "t"};
    std::pair<std::string, std::vector<double>> pr{"p", {1, 2}};
    std::chrono::milliseconds ms{1234};
    std::chrono::system_clock::time_point tp{std::chrono::seconds{99}};
    std::unique_ptr<int> up = std::make_unique<int>(7), unull;
    std::shared_ptr<std::string> sp = std::make_shared<std::string>("shared"), snull;
    std::complex<double> cx{1.5, -2};
    std::array<double, 3> ad{0.25, 0.5, 1};
    Colour c = Colour::blue;
    Point p{1, 2, "p"};
    Split sl{9, "split"};
    Derived dv;
    dv.x = 3;
    dv.label = "d";
    dv.extra = 11;
    Free fr{6.5};
    std::ostringstream os;
    {
        cereal::BinaryOutputArchive ar(os);
        ar(vb, va, vvs, dq, ls, m, um, st, some, none, var, tup, pr, ms, tp, up, unull, sp, snull,
           cx, ad, c, p, sl, dv, fr);
    }
    const std::string theirs = os.str();
    Buffer ours;
    sky::detail::save_to(ours, vb, va, vvs, dq, ls, m, um, st, some, none, var, tup, pr, ms, tp, up,
                         unull, sp, snull, cx, ad, c, p, sl, dv, fr);
    REQUIRE(ours.size() == theirs.size());
    CHECK(std::memcmp(ours.data(), theirs.data(), theirs.size()) == 0);

    decltype(vb) vb2;
    decltype(va) va2;
    decltype(vvs) vvs2;
    decltype(dq) dq2;
    decltype(ls) ls2;
    decltype(m) m2;
    decltype(um) um2;
    decltype(st) st2;
    decltype(some) some2, none2 = 1;
    decltype(var) var2;
    decltype(tup) tup2;
    decltype(pr) pr2;
    decltype(ms) ms2;
    decltype(tp) tp2;
    decltype(up) up2, unull2 = std::make_unique<int>(1);
    decltype(sp) sp2, snull2 = std::make_shared<std::string>("x");
    decltype(cx) cx2;
    decltype(ad) ad2;
    Colour c2 = Colour::red;
    Point p2;
    Split sl2;
    Derived dv2;
    Free fr2;
    sky::detail::load_from(ours.span(), vb2, va2, vvs2, dq2, ls2, m2, um2, st2, some2, none2, var2,
                           tup2, pr2, ms2, tp2, up2, unull2, sp2, snull2, cx2, ad2, c2, p2, sl2,
                           dv2, fr2);
    CHECK(vb2 == vb);
    CHECK(va2 == va);
    CHECK(vvs2 == vvs);
    CHECK(dq2 == dq);
    CHECK(ls2 == ls);
    CHECK(m2 == m);
    CHECK(um2 == um);
    CHECK(st2 == st);
    CHECK(some2 == some);
    CHECK_FALSE(none2.has_value());
    CHECK(var2 == var);
    CHECK(tup2 == tup);
    CHECK(pr2 == pr);
    CHECK(ms2 == ms);
    CHECK(tp2 == tp);
    REQUIRE(up2);
    CHECK(*up2 == 7);
    CHECK_FALSE(unull2);
    REQUIRE(sp2);
    CHECK(*sp2 == "shared");
    CHECK_FALSE(snull2);
    CHECK(cx2 == cx);
    CHECK(ad2 == ad);
    CHECK(c2 == c);
    CHECK(p2 == p);
    CHECK(sl2 == sl);
    CHECK(dv2 == dv);
    CHECK(fr2 == fr);
}

TEST_CASE("the decoder refuses a variant index, a bool or a pointer it cannot have written",
          "[serialize]") {
    Buffer b;
    const std::int32_t index = 5;
    b.append(&index, sizeof index);
    std::variant<int, std::string> v;
    CHECK_THROWS_AS(sky::detail::load_from(b.span(), v), cereal::Exception);
    Buffer bad_bool;
    bad_bool.push_back(std::byte{2});
    std::optional<int> o;
    CHECK_THROWS_AS(sky::detail::load_from(bad_bool.span(), o), cereal::Exception);
    Buffer back_reference;  // cereal's id of a pointer written before: sky never writes one
    const std::uint32_t id = 1;
    back_reference.append(&id, sizeof id);
    std::shared_ptr<int> sp;
    CHECK_THROWS_AS(sky::detail::load_from(back_reference.span(), sp), cereal::Exception);
    STATIC_REQUIRE(sky::serializable<Split>);
    STATIC_REQUIRE(sky::serializable<Derived>);
    STATIC_REQUIRE(sky::serializable<Free>);
    STATIC_REQUIRE(sky::serializable<std::unique_ptr<Point>>);
    STATIC_REQUIRE(sky::serializable<std::list<std::set<int>>>);
    STATIC_REQUIRE_FALSE(sky::serializable<std::vector<NotSerializable>>);
    STATIC_REQUIRE_FALSE(sky::serializable<int*>);
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
