// The non-template half of sky/detail/serialize.hpp: the errors of the bounded decoder (they are
// cereal::Exception, as when cereal's own archives did the decoding: the worker and the fuzz
// targets catch that type), the archives' version tables, and the vectors of standard numbers'
// decoding and result hand-over, compiled here once, not in every translation unit.
#include "sky/detail/serialize.hpp"

#include <cereal/details/helpers.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sky/detail/call.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

void throw_short_read(std::size_t wanted, std::size_t left) {
    throw cereal::Exception("Failed to read " + std::to_string(wanted) +
                            " bytes from input stream! Read " + std::to_string(left));
}

void throw_too_many(std::uint64_t count, std::size_t left) {
    throw cereal::Exception("a size of " + std::to_string(count) + " does not fit in the " +
                            std::to_string(left) + " bytes left");
}

void throw_bad_bool(std::uint8_t v) {
    throw cereal::Exception("a bool of value " + std::to_string(v));
}

void throw_bad_index(std::uint64_t index, std::size_t alternatives) {
    throw cereal::Exception("a variant index of " + std::to_string(index) + " for " +
                            std::to_string(alternatives) + " alternatives");
}

void throw_decode_error(const char* what) { throw cereal::Exception(what); }

void throw_vector_too_long(std::uint64_t count, std::size_t bytes) {
    throw cereal::Exception("a vector of " + std::to_string(count) +
                            " elements does not fit in the " + std::to_string(bytes) +
                            " bytes left");
}

struct VersionTable::Entries {
    std::vector<std::pair<const void*, std::uint32_t>> list;
};

const std::uint32_t* VersionTable::find(const void* key) const noexcept {
    if (entries_)
        for (const auto& [k, v] : entries_->list)
            if (k == key) return &v;
    return nullptr;
}

void VersionTable::add(const void* key, std::uint32_t version) {
    if (!entries_) entries_ = new Entries;
    entries_->list.emplace_back(key, version);
}

void VersionTable::release() noexcept {
    delete entries_;
    entries_ = nullptr;
}

#define SKY_DETAIL_DEFINE(E)                                                         \
    std::size_t load_flat(std::span<const std::byte> bytes, std::vector<E>& value) { \
        return load_flat<E, std::allocator<E>>(bytes, value);                        \
    }                                                                                \
    void save_flat_result(Buffer& out, std::vector<E>& r) {                          \
        save_flat_result<E, std::allocator<E>>(out, r);                              \
    }
SKY_DETAIL_FOR_EACH_NUMBER(SKY_DETAIL_DEFINE)
#undef SKY_DETAIL_DEFINE

std::shared_ptr<Buffer> make_shared_buffer() {
    auto b = std::make_shared<Buffer>();
    // Room for a few small arguments: a call of an int or two then holds a block of that size
    // instead of a growing buffer's first 256 bytes (a gather keeps every call's until it ends).
    b->reserve(32);
    return b;
}

void throw_undecodable(const char* what, const std::exception& e) {
    throw ProtocolError(std::string(what) + " could not be decoded: " + e.what());
}

}  // namespace sky::detail
