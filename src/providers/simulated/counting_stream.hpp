#pragma once
// A stream that counts the calls the worker completes (result and error frames), for
// lose_after_calls: the count is the client's, so the worker runtime knows nothing of faults.
// It only reads frame headers to find where frames end; the pool's own reader decodes them.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <memory>

#include "io/stream.hpp"
#include "runtime/protocol.hpp"

namespace sky::detail::simulated {

class CountingStream final : public io::Stream {
public:
    CountingStream(std::unique_ptr<io::Stream> inner, std::function<void()> on_call_done)
        : inner_(std::move(inner)), on_call_done_(std::move(on_call_done)) {}

    executor_type get_executor() override { return inner_->get_executor(); }
    void async_read_some(boost::asio::mutable_buffer buffer, io::IoHandler handler) override {
        // Completions run on the stream's strand, one read at a time: the scan needs no lock.
        inner_->async_read_some(buffer, [this, buffer, h = std::move(handler)](
                                            boost::system::error_code ec, std::size_t n) mutable {
            scan({static_cast<const std::byte*>(buffer.data()), n});
            std::move(h)(ec, n);
        });
    }
    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          io::IoHandler handler) override {
        inner_->async_write_some(buffers, std::move(handler));
    }
    std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) override {
        return inner_->try_write_some(buffers);
    }
    void close() noexcept override { inner_->close(); }
    std::string describe() const override { return inner_->describe(); }
    std::string failure() const override { return inner_->failure(); }

private:
    void scan(std::span<const std::byte> bytes) {
        while (!bytes.empty() && !lost_track_) {
            if (skip_ > 0) {
                const auto k =
                    static_cast<std::size_t>(std::min<std::uint64_t>(skip_, bytes.size()));
                skip_ -= k;
                bytes = bytes.subspan(k);
            } else {
                const std::size_t k = std::min(frame_header_size - have_, bytes.size());
                std::memcpy(header_.data() + have_, bytes.data(), k);
                have_ += k;
                bytes = bytes.subspan(k);
                if (have_ < frame_header_size) break;
                have_ = 0;
                try {
                    const FrameHeader h = decode_header(header_.data(), ~std::uint64_t{0});
                    skip_ = h.length;
                    counting_ =
                        h.call_id != 0 && (h.type == MsgType::result || h.type == MsgType::error);
                } catch (const std::exception&) {
                    lost_track_ = true;  // the pool's reader reports the bad stream
                    return;
                }
            }
            // A frame ends here: the call it answers is complete once all of it was delivered.
            if (skip_ == 0 && have_ == 0 && counting_) {
                counting_ = false;
                on_call_done_();
            }
        }
    }

    std::unique_ptr<io::Stream> inner_;
    std::function<void()> on_call_done_;
    std::array<std::byte, frame_header_size> header_{};
    std::size_t have_ = 0;
    std::uint64_t skip_ = 0;
    bool counting_ = false;
    bool lost_track_ = false;
};

}  // namespace sky::detail::simulated
