// CallDesc's special members, compiled once here rather than in every translation unit that
// makes a call (sky/detail/call.hpp).
#include "sky/detail/call.hpp"

namespace sky::detail {

CallDesc::CallDesc() noexcept = default;
CallDesc::CallDesc(const CallDesc&) = default;
CallDesc::CallDesc(CallDesc&&) noexcept = default;
CallDesc& CallDesc::operator=(const CallDesc&) = default;
CallDesc& CallDesc::operator=(CallDesc&&) noexcept = default;
CallDesc::~CallDesc() = default;

}  // namespace sky::detail
