#pragma once
// What a distributed call exposes: the frameworks' rendezvous services (PyTorch's TCPStore and
// gloo/NCCL, JAX's coordinator, TensorFlow's task servers) authenticate nobody, and whoever can
// connect to them can, by those projects' own words, run code as the job's user. Only a provider
// knows who can reach its nodes' ports, so each one states it in its descriptor
// (src/providers/descriptor), with no default: a default answer of "only the pool's own
// machines" would tell a new provider's nodes that they are safe. The pool only says what it was
// told, once, when its first distributed call starts.
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "sky/events.hpp"

namespace sky::detail {

/// What every notice says of the frameworks' services, before naming who can reach them.
inline constexpr std::string_view rendezvous_services =
    "the distributed framework's rendezvous services (PyTorch's TCPStore and gloo/NCCL, JAX's "
    "coordinator, TensorFlow's servers) authenticate nobody, and whoever connects to them can run "
    "code as the job's user";

/// Who besides the pool's own machines reaches its nodes' rendezvous ports. It has no default
/// constructor: whoever makes one says which it is.
class Exposure {
public:
    /// Only the pool's own machines get through; `why` names what closes the network (a
    /// security group, a firewall the pool made).
    static Exposure pool_machines_only(std::string why) { return {false, std::move(why)}; }
    /// Others get through; `notice` is the sentence the pool prints (it names who, and includes
    /// rendezvous_services).
    static Exposure open_to_others(std::string notice) { return {true, std::move(notice)}; }

    /// True when others get through: the pool says notice() once.
    [[nodiscard]] bool open() const noexcept { return open_; }
    /// The notice (open), or what closes the network (not open).
    [[nodiscard]] const std::string& text() const noexcept { return text_; }

private:
    Exposure(bool open, std::string text) : open_(open), text_(std::move(text)) {}
    bool open_;
    std::string text_;
};

/// The once-per-pool notice: where `exposure` is open, prints it on stderr ("sky: notice: ...")
/// and emits it as an ErrorEvent. The pool calls it when its first call with a distributed
/// plugin starts (PoolCore::submit).
void notice_distributed_exposure(const Exposure& exposure, const std::function<void(Event)>& emit);

}  // namespace sky::detail
