// EC2 answers as the AWS adapter reads them: the error document parser (parse_ec2_error, which
// must not throw: a body that is not an error is nullopt), and DescribeInstances /
// RunInstances / DescribeSpotPriceHistory / DescribeInstanceTypes bodies through parse_xml,
// xml_to_json and the list_of / str_of walks the adapter does over them. The adapter's own
// mapping (instance_from in aws_adapter.cpp) is file-local and is not reached from here.
#include <cstdint>
#include <string>

#include "aws/ec2_protocol.hpp"
#include "aws/xml.hpp"
#include "fuzz/fuzz_common.hpp"

using namespace sky::detail::aws;
using nlohmann::json;

namespace {

// Every field the adapter reads of one instance, in the way it reads them.
std::size_t walk_instance(const json& inst) {
    std::size_t n = str_of(inst, "instanceId").size();
    if (inst.is_object() && inst.contains("instanceState"))
        n += str_of(inst["instanceState"], "name").size();
    if (inst.is_object() && inst.contains("stateReason"))
        n += str_of(inst["stateReason"], "code").size() +
             str_of(inst["stateReason"], "message").size();
    for (const char* k : {"ipAddress", "privateIpAddress", "instanceLifecycle", "instanceType"})
        n += str_of(inst, k).size();
    for (const auto& tag : list_of(inst, "tagSet"))
        n += str_of(tag, "key").size() + str_of(tag, "value").size();
    return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body = sky::fuzz::text(data, size);
    std::optional<Ec2ErrorInfo> error;
    sky::fuzz::expect_typed([&] { error = parse_ec2_error(body); });
    if (error) sky::fuzz::check(!error->code.empty(), "an EC2 error without a code");
    sky::fuzz::expect_typed([&] {
        const json j = xml_to_json(parse_xml(body));
        std::size_t n = 0;
        for (const auto& reservation : list_of(j, "reservationSet"))
            for (const auto& inst : list_of(reservation, "instancesSet")) n += walk_instance(inst);
        for (const auto& inst : list_of(j, "instancesSet")) n += walk_instance(inst);
        for (const auto& price : list_of(j, "spotPriceHistorySet"))
            n += str_of(price, "instanceType").size() + str_of(price, "spotPrice").size() +
                 str_of(price, "availabilityZone").size();
        for (const auto& type : list_of(j, "instanceTypeSet")) {
            n += str_of(type, "instanceType").size();
            if (type.is_object() && type.contains("gpuInfo"))
                for (const auto& gpu : list_of(type["gpuInfo"], "gpus"))
                    n += str_of(gpu, "name").size() + str_of(gpu, "count").size();
        }
        (void)n;
    });
    return 0;
}
