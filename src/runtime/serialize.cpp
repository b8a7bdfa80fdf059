// The non-template half of sky/detail/serialize.hpp: the archives' construction (cereal's
// archive bases are instantiated here, once, not in every translation unit that makes a call)
// and the errors of the bounded decoder.
#include "sky/detail/serialize.hpp"

#include <ostream>
#include <streambuf>
#include <string>

#include "sky/detail/call.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

namespace {

// A std::streambuf that appends to a Buffer (cereal's BinaryOutputArchive writes through sputn).
class BufferWriter : public std::streambuf {
public:
    explicit BufferWriter(Buffer& b) : buf_(b) {}

protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        buf_.append(s, static_cast<std::size_t>(n));
        return n;
    }
    int_type overflow(int_type c) override {
        if (c != traits_type::eof()) buf_.push_back(static_cast<std::byte>(c));
        return traits_type::not_eof(c);
    }

private:
    Buffer& buf_;
};

}  // namespace

struct Encoder::State {
    explicit State(Buffer& out) : writer(out), stream(&writer), archive(stream) {}
    BufferWriter writer;
    std::ostream stream;
    cereal::BinaryOutputArchive archive;
};

Encoder::Encoder(Buffer& out) : state_(std::make_unique<State>(out)), archive_(&state_->archive) {}
Encoder::~Encoder() = default;

BoundedInputArchive::BoundedInputArchive(std::span<const std::byte> bytes)
    : cereal::InputArchive<BoundedInputArchive, cereal::AllowEmptyClassElision>(this),
      at_(bytes.data()),
      end_(bytes.data() + bytes.size()) {}
BoundedInputArchive::~BoundedInputArchive() = default;

void BoundedInputArchive::throw_short(std::streamsize size) const {
    throw cereal::Exception("Failed to read " + std::to_string(size) +
                            " bytes from input stream! Read " + std::to_string(remaining()));
}

void BoundedInputArchive::throw_too_many(std::uint64_t count) const {
    throw cereal::Exception("a size of " + std::to_string(count) + " does not fit in the " +
                            std::to_string(remaining()) + " bytes left");
}

void throw_bad_bool(std::uint8_t v) {
    throw cereal::Exception("a bool of value " + std::to_string(v));
}

void throw_string_too_long(std::uint64_t count, std::size_t bytes) {
    throw cereal::Exception("a string of " + std::to_string(count) + " bytes does not fit in the " +
                            std::to_string(bytes) + " bytes left");
}

void throw_short_read(std::size_t wanted, std::size_t left) {
    throw cereal::Exception("Failed to read " + std::to_string(wanted) +
                            " bytes from input stream! Read " + std::to_string(left));
}

void throw_vector_too_long(std::uint64_t count, std::size_t bytes) {
    throw cereal::Exception("a vector of " + std::to_string(count) +
                            " elements does not fit in the " + std::to_string(bytes) +
                            " bytes left");
}

void throw_undecodable(const char* what, const std::exception& e) {
    throw ProtocolError(std::string(what) + " could not be decoded: " + e.what());
}

}  // namespace sky::detail
