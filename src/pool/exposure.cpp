#include "pool/exposure.hpp"

#include <cstdio>

namespace sky::detail {

void notice_distributed_exposure(const Exposure& exposure, const std::function<void(Event)>& emit) {
    if (!exposure.open()) return;
    std::fprintf(stderr, "sky: notice: %s\n", exposure.text().c_str());
    if (emit) emit(ErrorEvent{exposure.text(), std::nullopt});
}

}  // namespace sky::detail
