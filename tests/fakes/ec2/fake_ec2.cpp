#include "fakes/ec2/fake_ec2.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <ctime>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>

#include "fakes/common/host_binding.hpp"
#include "fakes/gzip_bomb.hpp"
#include "hosts/test_hosts.hpp"
#include "http/http_client.hpp"
#include "support/aws/sigv4_verify.hpp"

namespace sky::test {

using nlohmann::json;
namespace aws = sky::detail::aws;

namespace {

constexpr std::string_view kNamespace = "http://ec2.amazonaws.com/doc/2016-11-15/";
constexpr std::string_view kOwnerId = "123456789012";

[[noreturn]] void fail(int status, std::string code, std::string message) {
    throw Ec2Failure{status, std::move(code), std::move(message)};
}
[[noreturn]] void invalid(const std::string& message) {
    fail(400, "InvalidParameterValue", message);
}

std::string now_iso() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    return buf;
}

bool is_scalar(const std::string& type) {
    return type != "structure" && type != "list" && type != "map";
}

json convert_scalar(const std::string& type, const std::string& value, const std::string& name) {
    if (type == "integer" || type == "long") {
        try {
            std::size_t used = 0;
            long long v = std::stoll(value, &used);
            if (used == value.size()) return v;
        } catch (const std::logic_error&) {
        }
        invalid(fmt::format("Invalid value '{}' for {}: not an integer", value, name));
    }
    if (type == "boolean") {
        if (value == "true") return true;
        if (value == "false") return false;
        invalid(fmt::format("Invalid value '{}' for {}: must be true or false", value, name));
    }
    if (type == "float" || type == "double") {
        try {
            return std::stod(value);
        } catch (const std::logic_error&) {
            invalid(fmt::format("Invalid value '{}' for {}: not a number", value, name));
        }
    }
    if (type == "blob") {
        try {
            return aws::base64_decode(value);
        } catch (const sky::Error&) {
            invalid(fmt::format("Value for {} must be base64-encoded", name));
        }
    }
    return value;  // string, timestamp
}

// Inserts one wire parameter into the JSON being built. Lists are built as objects keyed by
// index, then turned into arrays by finalize().
void insert(const aws::ServiceModel& model, const json& shape, json& node,
            const std::vector<std::string>& segments, std::size_t i, const std::string& value,
            const std::string& full_name) {
    const std::string type = shape.at("type").get<std::string>();
    auto unknown = [&] {
        fail(400, "UnknownParameter", fmt::format("The parameter {} is not recognized", full_name));
    };
    if (i >= segments.size()) unknown();
    const json* ref = nullptr;
    std::string key;
    if (type == "structure") {
        for (const auto& [name, member] : shape.at("members").items()) {
            if (aws::ec2_query_name(name, member) == segments[i]) {
                ref = &member;
                key = name;
                break;
            }
        }
    } else if (type == "list") {
        const std::string& index = segments[i];
        if (index.empty() || index.size() > 6 ||
            !std::all_of(index.begin(), index.end(), ::isdigit) || std::stoi(index) < 1) {
            unknown();
        }
        ref = &shape.at("member");
        key = index;
    }
    if (!ref) unknown();
    const json& child = model.shape(ref->at("shape").get<std::string>());
    const std::string child_type = child.at("type").get<std::string>();
    if (is_scalar(child_type)) {
        if (i + 1 != segments.size()) unknown();
        if (node.contains(key)) invalid(fmt::format("The parameter {} is given twice", full_name));
        node[key] = convert_scalar(child_type, value, full_name);
        return;
    }
    if (!node.contains(key)) node[key] = json::object();
    insert(model, child, node[key], segments, i + 1, value, full_name);
}

json finalize(const aws::ServiceModel& model, const json& shape, json node) {
    const std::string type = shape.at("type").get<std::string>();
    if (type == "structure") {
        for (auto& [name, value] : node.items()) {
            const json& member = shape.at("members").at(name);
            const json& child = model.shape(member.at("shape").get<std::string>());
            if (!is_scalar(child.at("type").get<std::string>())) {
                value = finalize(model, child, std::move(value));
            }
        }
        return node;
    }
    if (type == "list") {
        std::vector<std::pair<int, json>> items;
        for (auto& [index, value] : node.items()) items.emplace_back(std::stoi(index), value);
        std::sort(items.begin(), items.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        const json& member = model.shape(shape.at("member").at("shape").get<std::string>());
        json array = json::array();
        for (auto& [index, value] : items) {
            array.push_back(is_scalar(member.at("type").get<std::string>())
                                ? value
                                : finalize(model, member, std::move(value)));
        }
        return array;
    }
    return node;
}

void check_required(const aws::ServiceModel& model, const json& shape, const json& node,
                    const std::string& prefix) {
    const std::string type = shape.at("type").get<std::string>();
    if (type == "structure") {
        for (const auto& required : shape.value("required", json::array())) {
            const std::string name = required.get<std::string>();
            if (!node.contains(name)) {
                const json& member = shape.at("members").at(name);
                std::string wire = aws::ec2_query_name(name, member);
                fail(400, "MissingParameter",
                     fmt::format("The request must contain the parameter {}",
                                 prefix.empty() ? wire : prefix + "." + wire));
            }
        }
        for (const auto& [name, value] : node.items()) {
            const json& member = shape.at("members").at(name);
            std::string wire = aws::ec2_query_name(name, member);
            check_required(model, model.shape(member.at("shape").get<std::string>()), value,
                           prefix.empty() ? wire : prefix + "." + wire);
        }
    } else if (type == "list") {
        const json& member = model.shape(shape.at("member").at("shape").get<std::string>());
        for (std::size_t i = 0; i < node.size(); ++i) {
            check_required(model, member, node[i], fmt::format("{}.{}", prefix, i + 1));
        }
    }
}

// '*' and '?' wildcards, as EC2 filters allow.
bool glob_match(const std::string& pattern, const std::string& text) {
    std::string regex;
    for (char c : pattern) {
        if (c == '*') {
            regex += ".*";
        } else if (c == '?') {
            regex += '.';
        } else if (std::isalnum(static_cast<unsigned char>(c))) {
            regex += c;
        } else {
            regex += '\\';
            regex += c;
        }
    }
    return std::regex_match(text, std::regex(regex));
}

bool any_match(const json& values, const std::string& text) {
    for (const auto& v : values) {
        if (glob_match(v.get<std::string>(), text)) return true;
    }
    return false;
}

json state(int code, const char* name) { return json{{"Code", code}, {"Name", name}}; }

// Whether a Describe* request's list of ids or names takes `v` (an empty list takes every one).
template <class List, class Value>
bool listed(const List& list, const Value& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

// A Describe* request that names a resource that does not exist is EC2's NotFound for it, before
// any filter is read.
template <class Known>
void require_known(const json& ids, const Known& known, const char* code, const char* what) {
    for (const auto& id : ids)
        if (!known.count(id.get<std::string>()))
            fail(400, code, fmt::format("The {} '{}' does not exist", what, id.get<std::string>()));
}

// What a resource shows under a filter name: its values there (a resource has many tags, so
// "tag-key" may name several); none when the name is no filter of that resource.
using FilterFields = std::function<std::optional<std::vector<std::string>>(const std::string&)>;

// Whether a resource passes every filter of a Describe* request, as EC2 reads them: every filter
// holds when any of its values (with '*' and '?' wildcards) matches any of the resource's values
// under its name. A filter name the resource does not know is InvalidParameterValue.
bool passes_filters(const json& filters, const FilterFields& fields) {
    bool ok = true;
    for (const auto& filter : filters) {
        const std::string name = filter.value("Name", "");
        const auto have = fields(name);
        if (!have) invalid(fmt::format("The filter '{}' is invalid", name));
        if (!ok) continue;  // the other names are still checked
        const json values = filter.value("Values", json::array());
        ok = std::any_of(have->begin(), have->end(),
                         [&](const std::string& v) { return any_match(values, v); });
    }
    return ok;
}

// What DescribeInstances filters read of an instance.
std::optional<std::vector<std::string>> instance_field(const json& instance,
                                                       const std::string& name) {
    using Values = std::vector<std::string>;
    if (name == "instance-state-name") return Values{instance["State"]["Name"]};
    if (name == "instance-id") return Values{instance["InstanceId"]};
    if (name == "instance-type") return Values{instance["InstanceType"]};
    if (name == "availability-zone") return Values{instance["Placement"]["AvailabilityZone"]};
    if (name == "instance-lifecycle") return Values{instance.value("InstanceLifecycle", "")};
    if (name == "ip-address") return Values{instance.value("PublicIpAddress", "")};
    const bool any_key = name == "tag-key", one_key = name.rfind("tag:", 0) == 0;
    if (!any_key && !one_key) return std::nullopt;
    Values out;
    for (const auto& tag : instance.value("Tags", json::array())) {
        if (any_key)
            out.push_back(tag["Key"]);
        else if (tag["Key"] == name.substr(4))
            out.push_back(tag["Value"]);
    }
    return out;
}

std::string md5_fingerprint(const std::string& data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr);
    std::string out;
    for (unsigned int i = 0; i < length; ++i) {
        if (i) out += ':';
        out += fmt::format("{:02x}", digest[i]);
    }
    return out;
}

// A stable per-type spot price: real ones move; the fake's only need to be plausible and fixed.
std::string spot_price_for(const std::string& type) {
    static const std::map<std::string, double> kKnown = {
        {"g4dn.xlarge", 0.1578},   {"g5.xlarge", 0.3852},  {"g5.2xlarge", 0.4573},
        {"g6.xlarge", 0.2943},     {"p3.2xlarge", 0.9180}, {"p4d.24xlarge", 9.8306},
        {"p5.48xlarge", 31.464},   {"t3.micro", 0.0031},   {"m5.large", 0.0342},
        {"p4de.24xlarge", 12.2911}};
    auto it = kKnown.find(type);
    double price =
        it != kKnown.end() ? it->second : 0.05 + (std::hash<std::string>{}(type) % 500) / 1000.0;
    return fmt::format("{:.6f}", price);
}

}  // namespace

// -------------------------------------------------------------------------------------------------
// Model-driven (de)serialization

json decode_ec2_params(const aws::ServiceModel& model, const std::string& operation,
                       const std::vector<std::pair<std::string, std::string>>& params) {
    const json& op = model.operation(operation);
    const bool has_input = op.contains("input");
    json root = json::object();
    for (const auto& [name, value] : params) {
        if (name == "Action" || name == "Version") continue;
        if (!has_input) {
            fail(400, "UnknownParameter", fmt::format("The parameter {} is not recognized", name));
        }
        std::vector<std::string> segments;
        for (std::size_t start = 0;;) {
            auto dot = name.find('.', start);
            segments.push_back(name.substr(start, dot - start));
            if (dot == std::string::npos) break;
            start = dot + 1;
        }
        insert(model, model.shape(op["input"]["shape"].get<std::string>()), root, segments, 0,
               value, name);
    }
    if (!has_input) return root;
    const json& input = model.shape(op["input"]["shape"].get<std::string>());
    root = finalize(model, input, std::move(root));
    check_required(model, input, root, "");
    return root;
}

void write_ec2_xml(const aws::ServiceModel& model, const json& ref, const json& value,
                   const std::string& element, std::string& out) {
    const json& shape = model.shape(ref.at("shape").get<std::string>());
    const std::string type = shape.at("type").get<std::string>();
    if (type == "structure") {
        out += "<" + element + ">";
        for (const auto& [name, member] : shape.at("members").items()) {
            if (value.contains(name) && !value[name].is_null()) {
                write_ec2_xml(model, member, value[name], member.value("locationName", name), out);
            }
        }
        out += "</" + element + ">";
    } else if (type == "list") {
        if (value.empty()) {
            out += "<" + element + "/>";
            return;
        }
        out += "<" + element + ">";
        const json& member = shape.at("member");
        for (const auto& item : value) {
            write_ec2_xml(model, member, item, member.value("locationName", "member"), out);
        }
        out += "</" + element + ">";
    } else {
        std::string text;
        if (value.is_boolean()) {
            text = value.get<bool>() ? "true" : "false";
        } else if (value.is_number_integer()) {
            text = value.dump();
        } else if (value.is_number()) {
            text = fmt::format("{}", value.get<double>());
        } else if (type == "blob") {
            text = aws::base64_encode(value.get<std::string>());
        } else {
            text = value.get<std::string>();
        }
        out += "<" + element + ">" + aws::xml_escape(text) + "</" + element + ">";
    }
}

// -------------------------------------------------------------------------------------------------
// Server

struct FakeEc2::Net {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor{io};
};

FakeEc2::FakeEc2(FakeEc2Options options)
    : options_(std::move(options)), model_(aws::ServiceModel::load(options_.model_path)) {
    if (options_.secret_access_key.empty())
        throw sky::ConfigError("fake EC2: a secret key is required");
    if (options_.hosts)
        binding_ = std::make_unique<HostBinding>(*options_.hosts, options_.install_host_key);
    images_ = {{{"ImageId", "ami-0dlami0000000001"},
                {"Name", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250101"},
                {"OwnerId", "898082745236"},
                {"ImageOwnerAlias", "amazon"},
                {"State", "available"},
                {"Architecture", "x86_64"},
                {"CreationDate", "2025-01-01T00:00:00.000Z"},
                {"Public", true},
                {"ImageType", "machine"},
                {"RootDeviceType", "ebs"},
                {"RootDeviceName", "/dev/sda1"},
                {"VirtualizationType", "hvm"},
                {"Hypervisor", "xen"}},
               {{"ImageId", "ami-0dlami0000000002"},
                {"Name", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250301"},
                {"OwnerId", "898082745236"},
                {"ImageOwnerAlias", "amazon"},
                {"State", "available"},
                {"Architecture", "x86_64"},
                {"CreationDate", "2025-03-01T00:00:00.000Z"},
                {"Public", true},
                {"ImageType", "machine"},
                {"RootDeviceType", "ebs"},
                {"RootDeviceName", "/dev/sda1"},
                {"VirtualizationType", "hvm"},
                {"Hypervisor", "xen"}},
               {{"ImageId", "ami-0ubuntu000000001"},
                {"Name", "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20250101"},
                {"OwnerId", "099720109477"},
                {"State", "available"},
                {"Architecture", "x86_64"},
                {"CreationDate", "2025-01-01T00:00:00.000Z"},
                {"Public", true},
                {"ImageType", "machine"},
                {"RootDeviceType", "ebs"},
                {"RootDeviceName", "/dev/sda1"},
                {"VirtualizationType", "hvm"},
                {"Hypervisor", "xen"}}};
    security_groups_["sg-0default00000001"] = {{"GroupId", "sg-0default00000001"},
                                               {"GroupName", "default"},
                                               {"Description", "default VPC security group"},
                                               {"OwnerId", kOwnerId},
                                               {"VpcId", "vpc-0fake0000000001"},
                                               {"IpPermissions", json::array()}};

    if (!options_.instance_types_path.empty()) {
        std::ifstream in(options_.instance_types_path, std::ios::binary);
        if (!in) {
            throw sky::ConfigError("fake EC2: cannot read " + options_.instance_types_path);
        }
        json all = json::parse(in);
        if (!all.is_object()) {
            throw sky::ConfigError("fake EC2: " + options_.instance_types_path +
                                   " is not an object of instance types");
        }
        for (auto& [name, info] : all.items()) instance_types_[name] = std::move(info);
    }
    for (const auto& [name, patch] : options_.instance_type_overrides) {
        json& info = instance_types_[name];
        if (info.is_null()) info = json{{"InstanceType", name}};
        info.merge_patch(patch);
    }

    net_ = std::make_unique<Net>();
    boost::asio::ip::tcp::endpoint where(boost::asio::ip::make_address("127.0.0.1"), options_.port);
    net_->acceptor.open(where.protocol());
    net_->acceptor.set_option(boost::asio::socket_base::reuse_address(true));
    net_->acceptor.bind(where);
    net_->acceptor.listen();
    port_ = net_->acceptor.local_endpoint().port();
    acceptor_ = std::thread([this] { serve(); });
}

FakeEc2::~FakeEc2() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    std::lock_guard lock(threads_mutex_);
    for (auto& t : connections_) t.join();
}

std::string FakeEc2::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeEc2::inject_fault(Ec2Fault fault) {
    std::lock_guard lock(mutex_);
    faults_.push_back(std::move(fault));
}

std::uint64_t FakeEc2::add_fault_rate(Ec2FaultRate rate) {
    auto dice = std::make_shared<FaultDice>("fake EC2", rate.kinds, rate.probability, rate.seed);
    std::lock_guard lock(mutex_);
    rates_.emplace_back(std::move(rate), dice);
    return dice->seed();
}

void FakeEc2::clear_fault_rates() {
    std::lock_guard lock(mutex_);
    rates_.clear();
}

int FakeEc2::fault_hits(FaultKind kind) const {
    std::lock_guard lock(mutex_);
    return rate_hits_[static_cast<std::size_t>(kind)];
}

std::vector<json> FakeEc2::instances() const {
    std::lock_guard lock(mutex_);
    std::vector<json> out;
    for (const auto& id : instance_order_) out.push_back(instances_.at(id));
    return out;
}

std::string FakeEc2::user_data(const std::string& instance_id) const {
    std::lock_guard lock(mutex_);
    auto it = user_data_.find(instance_id);
    return it == user_data_.end() ? "" : it->second;
}

void FakeEc2::serve() {
    namespace http = boost::beast::http;
    using boost::asio::ip::tcp;
    while (!stop_) {
        pollfd fd{net_->acceptor.native_handle(), POLLIN, 0};
        if (::poll(&fd, 1, 50) <= 0) continue;
        auto socket = std::make_shared<tcp::socket>(net_->io);
        boost::system::error_code ec;
        net_->acceptor.accept(*socket, ec);
        if (ec) continue;
        std::lock_guard lock(threads_mutex_);
        connections_.emplace_back([this, socket] {
            // Keep-alive (botocore pools connections): serve requests until the client closes,
            // 30 s pass idle, or the server stops; every wait is bounded.
            timeval tv{5, 0};
            ::setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            boost::beast::flat_buffer buffer;
            for (int idle_ms = 0; !stop_ && idle_ms < 30000;) {
                if (buffer.size() == 0) {
                    pollfd p{socket->native_handle(), POLLIN, 0};
                    int ready = ::poll(&p, 1, 100);
                    if (ready <= 0) {
                        idle_ms += 100;
                        continue;
                    }
                }
                idle_ms = 0;
                http::request<http::string_body> request;
                boost::system::error_code ec;
                http::read(*socket, buffer, request, ec);
                if (ec) break;
                std::vector<std::pair<std::string, std::string>> headers;
                for (const auto& field : request) {
                    headers.emplace_back(std::string(field.name_string()),
                                         std::string(field.value()));
                }
                Ec2Reply reply = handle(std::string(request.method_string()),
                                        std::string(request.target()), headers, request.body());
                if (reply.delivery == Ec2Reply::Delivery::stall) {
                    // Never answer: wait (bounded) until the client gives up or we stop.
                    for (int waited = 0; !stop_ && waited < 600000; waited += 100) {
                        pollfd p{socket->native_handle(), POLLIN, 0};
                        if (::poll(&p, 1, 100) <= 0) continue;
                        char sink[4096];
                        if (::recv(socket->native_handle(), sink, sizeof sink, MSG_DONTWAIT) <= 0)
                            break;
                    }
                    break;
                }
                http::response<http::string_body> response{static_cast<http::status>(reply.status),
                                                           request.version()};
                response.set(http::field::server, "AmazonEC2");
                response.set(http::field::content_type, "text/xml;charset=UTF-8");
                response.keep_alive(request.keep_alive());
                for (const auto& [name, value] : reply.headers) response.set(name, value);
                if (reply.delivery == Ec2Reply::Delivery::truncated) {
                    // The head announces more than is sent; half the body, then the close.
                    std::string raw = fmt::format(
                        "HTTP/1.1 {} OK\r\nServer: AmazonEC2\r\nContent-Type: "
                        "text/xml;charset=UTF-8\r\nContent-Length: {}\r\nConnection: "
                        "close\r\n\r\n{}",
                        reply.status, reply.body.size() + 64,
                        reply.body.substr(0, reply.body.size() / 2));
                    boost::asio::write(*socket, boost::asio::buffer(raw), ec);
                    break;
                }
                response.body() = std::move(reply.body);
                response.prepare_payload();
                http::write(*socket, response, ec);
                if (ec || !request.keep_alive()) break;
            }
            boost::system::error_code ignored;
            socket->shutdown(tcp::socket::shutdown_both, ignored);
        });
    }
}

Ec2Reply FakeEc2::handle(const std::string& method, const std::string& target,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::string& body) {
    ++requests_;
    if (is_sts_request(headers)) return handle_sts(method, target, headers, body);
    const std::string request_id = aws::random_uuid();
    auto error_reply = [&](const Ec2Failure& f) {
        return Ec2Reply{f.status, aws::make_ec2_error_xml(f.code, f.message, request_id)};
    };
    try {
        // 1. Authentication: a valid SigV4 signature by the one known key, scoped to ec2 and
        // this region.
        aws::SignableRequest signable{method, target, headers, body};
        aws::VerifyParams verify;
        verify.service = "ec2";
        verify.region = options_.region;
        verify.lookup = [this](const std::string& key) -> std::optional<aws::Credentials> {
            if (key != options_.access_key_id) return std::nullopt;
            return aws::Credentials{options_.access_key_id, options_.secret_access_key, ""};
        };
        aws::VerifyResult auth = aws::verify_request(signable, verify);
        if (!auth.ok) {
            ++auth_failures_;
            int status = auth.error_code == "SignatureDoesNotMatch" ? 403 : 401;
            if (auth.error_code == "IncompleteSignature") status = 400;
            fail(status, auth.error_code, auth.message);
        }

        // 2. Parameters: a form body on POST, the query string on GET.
        std::string query;
        if (method == "POST") {
            query = body;
        } else if (auto q = target.find('?'); q != std::string::npos) {
            query = target.substr(q + 1);
        }
        auto pairs = aws::parse_query_body(query);
        std::string action, version;
        for (const auto& [k, v] : pairs) {
            if (k == "Action") action = v;
            if (k == "Version") version = v;
        }
        if (action.empty())
            fail(400, "MissingAction", "The request must contain the parameter Action");
        if (version.empty())
            fail(400, "MissingParameter", "The request must contain the parameter Version");
        if (version != aws::kEc2ApiVersion) {
            fail(400, "NoSuchVersion",
                 fmt::format("The requested version ({}) of service AmazonEC2 does not exist",
                             version));
        }
        if (!model_.has_operation(action)) {
            fail(400, "InvalidAction",
                 fmt::format("The action {} is not valid for this web service.", action));
        }
        json params = decode_ec2_params(model_, action, pairs);

        // 3. Faults, once the request is known to be well-formed.
        std::optional<Ec2Fault> fault;
        std::optional<FaultKind> spoil;  // a rate's fault that lets the action happen
        {
            std::lock_guard lock(mutex_);
            for (auto it = faults_.begin(); it != faults_.end(); ++it) {
                if (!it->action.empty() && it->action != action) continue;
                fault = *it;
                if (--it->count <= 0) faults_.erase(it);
                break;
            }
            for (auto& [rate, dice] : rates_) {
                if (fault) break;
                if (!rate.action.empty() && rate.action != action) continue;
                auto kind = dice->roll();
                if (!kind || (*kind == FaultKind::capacity && action != "RunInstances")) continue;
                ++rate_hits_[static_cast<std::size_t>(*kind)];
                const std::size_t shape = dice->pick(2);
                switch (*kind) {
                    case FaultKind::server_error:
                        fault = shape == 0 ? Ec2Fault{.status = 500,
                                                      .code = "InternalError",
                                                      .message = "An internal error has occurred."}
                                           : Ec2Fault{.status = 503,
                                                      .code = "Unavailable",
                                                      .message =
                                                          "The service is unavailable. "
                                                          "Please try again shortly."};
                        break;
                    case FaultKind::throttled:
                        fault = Ec2Fault{};
                        break;
                    case FaultKind::capacity:
                        fault = Ec2Fault{.status = 500,
                                         .code = "InsufficientInstanceCapacity",
                                         .message =
                                             "We currently do not have sufficient "
                                             "capacity in the Availability Zone you "
                                             "requested."};
                        break;
                    case FaultKind::expired_auth:
                        fault = shape == 0 ? Ec2Fault{.status = 401,
                                                      .code = "AuthFailure",
                                                      .message =
                                                          "AWS was not able to validate "
                                                          "the provided access "
                                                          "credentials."}
                                           : Ec2Fault{.status = 400,
                                                      .code = "RequestExpired",
                                                      .message = "Request has expired."};
                        break;
                    default:
                        spoil = kind;
                        break;
                }
                break;
            }
        }
        if (fault) {
            for (auto waited = std::chrono::milliseconds(0); waited < fault->delay && !stop_;
                 waited += std::chrono::milliseconds(10)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (fault->gzip_bomb_bytes > 0) {
                // Built once per size: a 1 GiB bomb takes a second to make.
                static std::mutex bomb_mutex;
                static std::map<std::size_t, std::string> bombs;
                std::lock_guard bomb_lock(bomb_mutex);
                auto& bomb = bombs[fault->gzip_bomb_bytes];
                if (bomb.empty()) bomb = gzip_bomb(fault->gzip_bomb_bytes);
                return Ec2Reply{200, bomb, {{"Content-Encoding", "gzip"}}};
            }
            if (fault->lose_answer)
                spoil = FaultKind::stall;
            else if (fault->status != 200)
                fail(fault->status, fault->code, fault->message);
        }
        if (params.value("DryRun", false)) {
            fail(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.");
        }

        json result = dispatch(action, params);
        std::string xml = fmt::format(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{}Response xmlns=\"{}\">"
            "<requestId>{}</requestId>",
            action, kNamespace, request_id);
        const json& op = model_.operation(action);
        if (op.contains("output")) {
            const json& shape = model_.shape(op["output"]["shape"].get<std::string>());
            for (const auto& [name, member] : shape.at("members").items()) {
                if (result.contains(name)) {
                    write_ec2_xml(model_, member, result[name], member.value("locationName", name),
                                  xml);
                }
            }
        }
        xml += fmt::format("</{}Response>", action);
        Ec2Reply reply{200, std::move(xml)};
        if (spoil == FaultKind::stall) reply.delivery = Ec2Reply::Delivery::stall;
        if (spoil == FaultKind::truncated) reply.delivery = Ec2Reply::Delivery::truncated;
        if (spoil == FaultKind::malformed) reply.body = malformed_body(reply.body);
        return reply;
    } catch (const Ec2Failure& f) {
        return error_reply(f);
    } catch (const std::exception& e) {
        return error_reply({500, "InternalError", std::string("fake EC2 bug: ") + e.what()});
    }
}

std::string FakeEc2::new_id(const std::string& prefix) {
    return fmt::format("{}-{:017x}", prefix, 0x0fa4e000000000ULL + next_id_++);
}

json FakeEc2::dispatch(const std::string& action, const json& params) {
    if (action == "RunInstances") return run_instances(params);
    if (action == "DescribeInstances") return describe_instances(params);
    if (action == "TerminateInstances") return terminate_instances(params);
    if (action == "DescribeSpotPriceHistory") return describe_spot_price_history(params);
    if (action == "DescribeInstanceTypes") return describe_instance_types(params);
    if (action == "ImportKeyPair") return import_key_pair(params);
    if (action == "DescribeKeyPairs") return describe_key_pairs(params);
    if (action == "DeleteKeyPair") return delete_key_pair(params);
    if (action == "CreateSecurityGroup") return create_security_group(params);
    if (action == "DescribeSecurityGroups") return describe_security_groups(params);
    if (action == "AuthorizeSecurityGroupIngress") return authorize_ingress(params);
    if (action == "DescribeImages") return describe_images(params);
    if (action == "DeleteSecurityGroup") return delete_security_group(params);
    fail(400, "UnsupportedOperation", fmt::format("The fake EC2 does not implement {}", action));
}

json FakeEc2::run_instances(const json& params) {
    std::lock_guard lock(mutex_);
    const long long min_count = params.at("MinCount").get<long long>();
    const long long max_count = params.at("MaxCount").get<long long>();
    if (min_count < 1 || max_count < min_count || max_count > 100) {
        invalid(
            "MinCount must be at least 1 and MaxCount at least MinCount (and at most 100 here)");
    }
    if (auto token = params.value("ClientToken", ""); !token.empty()) {
        if (auto it = client_tokens_.find(token); it != client_tokens_.end()) {
            // Idempotent: the same token returns the original reservation.
            json reservation = reservations_.at(it->second);
            json instances = json::array();
            for (const auto& id : reservation["InstanceIds"])
                instances.push_back(instances_.at(id));
            reservation.erase("InstanceIds");
            reservation["Instances"] = instances;
            return reservation;
        }
    }
    if (!params.contains("ImageId"))
        fail(400, "MissingParameter", "The request must contain the parameter ImageId");
    const std::string image = params["ImageId"];
    bool image_known = std::any_of(images_.begin(), images_.end(),
                                   [&](const json& i) { return i["ImageId"] == image; });
    if (!image_known) {
        fail(400, "InvalidAMIID.NotFound",
             fmt::format("The image id '[{}]' does not exist", image));
    }
    const std::string type = params.value("InstanceType", "m1.small");
    if (type.find('.') == std::string::npos) {
        invalid(fmt::format("Invalid value '{}' for InstanceType.", type));
    }
    std::string key_name = params.value("KeyName", "");
    if (!key_name.empty() && !key_pairs_.count(key_name)) {
        fail(400, "InvalidKeyPair.NotFound",
             fmt::format("The key pair '{}' does not exist", key_name));
    }
    json groups = json::array();
    for (const auto& id : params.value("SecurityGroupIds", json::array())) {
        auto it = security_groups_.find(id.get<std::string>());
        if (it == security_groups_.end()) {
            fail(400, "InvalidGroup.NotFound",
                 fmt::format("The security group '{}' does not exist", id.get<std::string>()));
        }
        groups.push_back(
            {{"GroupId", it->second["GroupId"]}, {"GroupName", it->second["GroupName"]}});
    }
    if (groups.empty())
        groups.push_back({{"GroupId", "sg-0default00000001"}, {"GroupName", "default"}});
    std::string user_data;
    if (params.contains("UserData")) {
        try {
            user_data = aws::base64_decode(params["UserData"].get<std::string>());
        } catch (const sky::Error&) {
            invalid("Invalid BASE64 encoding of user data.");
        }
    }
    json tags = json::array();
    for (const auto& spec : params.value("TagSpecifications", json::array())) {
        if (spec.value("ResourceType", "") == "instance") {
            for (const auto& tag : spec.value("Tags", json::array())) tags.push_back(tag);
        }
    }
    const bool spot = params.contains("InstanceMarketOptions") &&
                      params["InstanceMarketOptions"].value("MarketType", "") == "spot";
    const std::string az =
        params.contains("Placement") && params["Placement"].contains("AvailabilityZone")
            ? params["Placement"]["AvailabilityZone"].get<std::string>()
            : options_.region + "a";

    // Test hosts: each instance is a free host, booted as cloud-init would from the user-data
    // (the shared host binding reads its keys; the script never runs here). As EC2 does, as many
    // instances start as there is capacity for, up to MaxCount; fewer than MinCount is
    // InsufficientInstanceCapacity.
    long long count = max_count;
    std::string authorized;
    if (binding_) {
        const auto free_hosts = static_cast<long long>(options_.hosts->size()) -
                                static_cast<long long>(binding_->machines().size());
        count = std::min(max_count, free_hosts);
        if (count < min_count) {
            fail(500, "InsufficientInstanceCapacity",
                 fmt::format("We currently do not have sufficient {} capacity in the Availability "
                             "Zone you requested ({}). Our system will be working on provisioning "
                             "additional capacity.",
                             type, az));
        }
        if (auto it = key_material_.find(key_name); it != key_material_.end())
            authorized = it->second;
    }

    const std::string reservation_id = new_id("r");
    json instances = json::array();
    json ids = json::array();
    for (long long n = 0; n < count; ++n) {
        std::string id = new_id("i");
        unsigned long long seq = next_id_;
        std::string private_ip = fmt::format("10.0.{}.{}", (seq / 250) % 250, seq % 250 + 4);
        if (binding_) {
            const std::optional<int> h = binding_->boot_any(id, user_data, authorized);
            if (!h) throw std::logic_error("fake EC2: a free test host went away mid-launch");
            private_ip = options_.hosts->address(*h);
        }
        json instance = {
            {"InstanceId", id},
            {"ImageId", image},
            {"State", state(0, "pending")},
            {"PrivateDnsName", fmt::format("ip-{}.ec2.internal",
                                           std::regex_replace(private_ip, std::regex("\\."), "-"))},
            {"PublicDnsName", ""},
            {"StateTransitionReason", ""},
            {"AmiLaunchIndex", n},
            {"ProductCodes", json::array()},
            {"InstanceType", type},
            {"LaunchTime", now_iso()},
            {"Placement", {{"AvailabilityZone", az}, {"GroupName", ""}, {"Tenancy", "default"}}},
            {"Monitoring", {{"State", "disabled"}}},
            {"SubnetId", "subnet-0fake000000001"},
            {"VpcId", "vpc-0fake0000000001"},
            {"PrivateIpAddress", private_ip},
            {"SecurityGroups", groups},
            {"StateReason", {{"Code", "pending"}, {"Message", "pending"}}},
            {"Architecture", "x86_64"},
            {"RootDeviceType", "ebs"},
            {"RootDeviceName", "/dev/sda1"},
            {"BlockDeviceMappings", json::array()},
            {"VirtualizationType", "hvm"},
            {"ClientToken", params.value("ClientToken", "")},
            {"Tags", tags},
            {"Hypervisor", "xen"},
            {"EbsOptimized", false},
        };
        if (!key_name.empty()) instance["KeyName"] = key_name;
        // As EC2 reports them: the request's options over the account defaults (IMDSv1 allowed).
        json metadata = {{"State", "applied"},
                         {"HttpTokens", "optional"},
                         {"HttpPutResponseHopLimit", 1},
                         {"HttpEndpoint", "enabled"},
                         {"HttpProtocolIpv6", "disabled"},
                         {"InstanceMetadataTags", "disabled"}};
        if (params.contains("MetadataOptions")) metadata.merge_patch(params["MetadataOptions"]);
        instance["MetadataOptions"] = metadata;
        if (spot) {
            instance["InstanceLifecycle"] = "spot";
            instance["SpotInstanceRequestId"] = new_id("sir");
        }
        instances_[id] = instance;
        instance_order_.push_back(id);
        if (!user_data.empty()) user_data_[id] = user_data;
        instances.push_back(instance);
        ids.push_back(id);
    }
    json reservation = {{"ReservationId", reservation_id},
                        {"OwnerId", kOwnerId},
                        {"Groups", json::array()},
                        {"InstanceIds", ids}};
    reservations_[reservation_id] = reservation;
    if (auto token = params.value("ClientToken", ""); !token.empty())
        client_tokens_[token] = reservation_id;
    reservation.erase("InstanceIds");
    reservation["Instances"] = instances;
    return reservation;
}

void FakeEc2::advance_states() {
    // Each DescribeInstances moves instances one step: pending -> running (an address appears),
    // shutting-down -> terminated (the address goes).
    for (auto& [id, instance] : instances_) {
        const std::string name = instance["State"]["Name"];
        if (name == "pending") {
            instance["State"] = state(16, "running");
            instance.erase("StateReason");
            unsigned long long n = std::hash<std::string>{}(id) % 250 + 2;
            instance["PublicIpAddress"] = fmt::format("203.0.113.{}", n);
            if (auto h = binding_ ? binding_->host_of(id) : std::nullopt)
                instance["PublicIpAddress"] = options_.hosts->address(*h);
            instance["PublicDnsName"] = fmt::format("ec2-203-0-113-{}.compute-1.amazonaws.com", n);
        } else if (name == "shutting-down") {
            instance["State"] = state(48, "terminated");
            interface_outlives(instance);
            instance.erase("PublicIpAddress");
            instance["PublicDnsName"] = "";
            instance["StateReason"] = {
                {"Code", "Client.UserInitiatedShutdown"},
                {"Message", "Client.UserInitiatedShutdown: User initiated shutdown"}};
        }
    }
}

json FakeEc2::describe_instances(const json& params) {
    std::lock_guard lock(mutex_);
    advance_states();
    std::vector<std::string> wanted;
    for (const auto& id : params.value("InstanceIds", json::array())) {
        if (!instances_.count(id.get<std::string>())) {
            fail(400, "InvalidInstanceID.NotFound",
                 fmt::format("The instance ID '{}' does not exist", id.get<std::string>()));
        }
        wanted.push_back(id);
    }
    const json filters = params.value("Filters", json::array());
    json reservations = json::array();
    for (const auto& [rid, reservation] : reservations_) {
        json instances = json::array();
        for (const auto& id : reservation["InstanceIds"]) {
            if (!listed(wanted, id)) continue;
            const json& instance = instances_.at(id);
            if (passes_filters(filters, [&](const std::string& name) {
                    return instance_field(instance, name);
                }))
                instances.push_back(instance);
        }
        if (instances.empty()) continue;
        json r = reservation;
        r.erase("InstanceIds");
        r["Instances"] = instances;
        reservations.push_back(r);
    }
    return {{"Reservations", reservations}};
}

json FakeEc2::terminate_instances(const json& params) {
    std::lock_guard lock(mutex_);
    json changes = json::array();
    for (const auto& id : params.at("InstanceIds")) {
        auto it = instances_.find(id.get<std::string>());
        if (it == instances_.end()) {
            fail(400, "InvalidInstanceID.NotFound",
                 fmt::format("The instance ID '{}' does not exist", id.get<std::string>()));
        }
    }
    for (const auto& id : params.at("InstanceIds")) {
        json& instance = instances_.at(id.get<std::string>());
        json previous = instance["State"];
        const std::string name = previous["Name"];
        if (name != "terminated" && name != "shutting-down") {
            instance["State"] = state(32, "shutting-down");
            release_host(id.get<std::string>());
        }
        changes.push_back(
            {{"InstanceId", id}, {"CurrentState", instance["State"]}, {"PreviousState", previous}});
    }
    return {{"TerminatingInstances", changes}};
}

json FakeEc2::describe_spot_price_history(const json& params) {
    json types =
        params.value("InstanceTypes", json::array({"g5.xlarge", "g4dn.xlarge", "p3.2xlarge"}));
    json products = params.value("ProductDescriptions", json::array({"Linux/UNIX"}));
    std::vector<std::string> zones = {options_.region + "a", options_.region + "b",
                                      options_.region + "c"};
    if (params.contains("AvailabilityZone"))
        zones = {params["AvailabilityZone"].get<std::string>()};
    json history = json::array();
    for (const auto& type : types) {
        for (const auto& product : products) {
            for (const auto& zone : zones) {
                history.push_back({{"AvailabilityZone", zone},
                                   {"InstanceType", type},
                                   {"ProductDescription", product},
                                   {"SpotPrice", spot_price_for(type.get<std::string>())},
                                   {"Timestamp", now_iso()}});
            }
        }
    }
    return {{"SpotPriceHistory", history}, {"NextToken", ""}};
}

json FakeEc2::describe_instance_types(const json& params) {
    // instance_types_ is fixed after construction: no lock needed.
    const json names = params.value("InstanceTypes", json::array());
    std::vector<std::string> missing;
    for (const auto& name : names) {
        if (!instance_types_.count(name.get<std::string>())) missing.push_back(name);
    }
    if (!missing.empty()) {
        fail(400, "InvalidInstanceType",
             fmt::format("The following supplied instance types do not exist: [{}]",
                         fmt::join(missing, ", ")));
    }
    long long page = 100;  // EC2's most per page, and its default
    if (params.contains("MaxResults")) {
        page = params["MaxResults"].get<long long>();
        if (page < 5 || page > 100) {
            invalid(
                fmt::format("Invalid value '{}' for MaxResults: must be between 5 and 100", page));
        }
    }
    std::size_t start = 0;
    if (auto token = params.value("NextToken", ""); !token.empty()) {
        // The token is opaque to clients; here "itypes:<offset>".
        static const std::regex kToken("itypes:([0-9]{1,9})");
        std::smatch m;
        if (!std::regex_match(token, m, kToken)) {
            invalid("The NextToken is invalid");
        }
        start = std::stoul(m[1].str());
    }
    const json filters = params.value("Filters", json::array());
    std::vector<const json*> matched;
    for (const auto& [name, info] : instance_types_) {
        if (!listed(names, name)) continue;
        const bool ok = passes_filters(
            filters, [&](const std::string& f) -> std::optional<std::vector<std::string>> {
                if (f == "instance-type") return std::vector<std::string>{name};
                if (f == "supported-usage-class")
                    return info.value("SupportedUsageClasses", std::vector<std::string>{});
                if (f == "current-generation")
                    return std::vector<std::string>{
                        info.value("CurrentGeneration", true) ? "true" : "false"};
                return std::nullopt;
            });
        if (ok) matched.push_back(&info);
    }
    if (start > matched.size()) invalid("The NextToken is invalid");
    json out = json::array();
    const std::size_t end = std::min(matched.size(), start + static_cast<std::size_t>(page));
    for (std::size_t i = start; i < end; ++i) out.push_back(*matched[i]);
    json result = {{"InstanceTypes", out}};
    if (end < matched.size()) result["NextToken"] = fmt::format("itypes:{}", end);
    return result;
}

json FakeEc2::import_key_pair(const json& params) {
    std::lock_guard lock(mutex_);
    const std::string name = params.at("KeyName");
    const std::string material = params.at("PublicKeyMaterial");  // decoded from base64 already
    if (key_pairs_.count(name)) {
        fail(400, "InvalidKeyPair.Duplicate",
             fmt::format("The keypair '{}' already exists.", name));
    }
    std::istringstream words(material);
    std::string kind, blob;
    words >> kind >> blob;
    std::string decoded;
    try {
        decoded = aws::base64_decode(blob);
    } catch (const sky::Error&) {
    }
    if ((kind != "ssh-ed25519" && kind != "ssh-rsa" && kind.rfind("ecdsa-sha2-", 0) != 0) ||
        decoded.empty()) {
        fail(400, "InvalidKey.Format", "Key is not in valid OpenSSH public key format");
    }
    json tags = json::array();
    for (const auto& spec : params.value("TagSpecifications", json::array())) {
        for (const auto& tag : spec.value("Tags", json::array())) tags.push_back(tag);
    }
    json info = {{"KeyName", name},
                 {"KeyFingerprint", md5_fingerprint(decoded)},
                 {"KeyPairId", new_id("key")},
                 {"KeyType", kind == "ssh-rsa" ? "rsa" : "ed25519"},
                 {"Tags", tags}};
    key_pairs_[name] = info;
    key_material_[name] = material;
    return info;
}

json FakeEc2::describe_key_pairs(const json& params) {
    std::lock_guard lock(mutex_);
    json out = json::array();
    auto names = params.value("KeyNames", json::array());
    require_known(names, key_pairs_, "InvalidKeyPair.NotFound", "key pair");
    for (const auto& [name, info] : key_pairs_) {
        if (!listed(names, name)) continue;
        const bool ok =
            passes_filters(params.value("Filters", json::array()),
                           [&](const std::string& f) -> std::optional<std::vector<std::string>> {
                               if (f == "key-name") return std::vector<std::string>{name};
                               return std::nullopt;
                           });
        if (ok) out.push_back(info);
    }
    return {{"KeyPairs", out}};
}

json FakeEc2::delete_key_pair(const json& params) {
    std::lock_guard lock(mutex_);
    key_material_.erase(params.value("KeyName", ""));
    key_pairs_.erase(params.value("KeyName", ""));  // deleting a missing key succeeds, as on EC2
    return {{"Return", true}};
}

json FakeEc2::create_security_group(const json& params) {
    std::lock_guard lock(mutex_);
    const std::string name = params.at("GroupName");
    for (const auto& [id, group] : security_groups_) {
        if (group["GroupName"] == name) {
            fail(400, "InvalidGroup.Duplicate",
                 fmt::format("The security group '{}' already exists for VPC 'vpc-0fake0000000001'",
                             name));
        }
    }
    std::string id = new_id("sg");
    security_groups_[id] = {{"GroupId", id},
                            {"GroupName", name},
                            {"Description", params.at("Description")},
                            {"OwnerId", kOwnerId},
                            {"VpcId", params.value("VpcId", "vpc-0fake0000000001")},
                            {"IpPermissions", json::array()}};
    return {{"GroupId", id}};
}

json FakeEc2::describe_security_groups(const json& params) {
    std::lock_guard lock(mutex_);
    json out = json::array();
    auto ids = params.value("GroupIds", json::array());
    auto names = params.value("GroupNames", json::array());
    require_known(ids, security_groups_, "InvalidGroup.NotFound", "security group");
    for (const auto& [id, group] : security_groups_) {
        if (!listed(ids, id) || !listed(names, group["GroupName"])) continue;
        const bool ok =
            passes_filters(params.value("Filters", json::array()),
                           [&](const std::string& f) -> std::optional<std::vector<std::string>> {
                               if (f == "group-name")
                                   return std::vector<std::string>{group["GroupName"]};
                               if (f == "group-id") return std::vector<std::string>{id};
                               if (f == "vpc-id") return std::vector<std::string>{group["VpcId"]};
                               return std::nullopt;
                           });
        if (ok) out.push_back(group);
    }
    return {{"SecurityGroups", out}};
}

json FakeEc2::authorize_ingress(const json& params) {
    std::lock_guard lock(mutex_);
    const std::string id = params.value("GroupId", "");
    auto it = security_groups_.find(id);
    if (it == security_groups_.end()) {
        fail(400, "InvalidGroup.NotFound",
             fmt::format("The security group '{}' does not exist", id));
    }
    for (const auto& permission : params.value("IpPermissions", json::array())) {
        it->second["IpPermissions"].push_back(permission);
    }
    return {{"Return", true}};
}

json FakeEc2::describe_images(const json& params) {
    std::lock_guard lock(mutex_);
    json out = json::array();
    auto ids = params.value("ImageIds", json::array());
    auto owners = params.value("Owners", json::array());
    for (const auto& image : images_) {
        if (!listed(ids, image["ImageId"])) continue;
        bool owner_ok = owners.empty();
        for (const auto& owner : owners) {
            owner_ok = owner_ok || owner == image["OwnerId"] ||
                       (image.contains("ImageOwnerAlias") && owner == image["ImageOwnerAlias"]);
        }
        if (!owner_ok) continue;
        // Each filter name reads the image field of the same meaning.
        static const std::map<std::string, std::string> kField = {{"name", "Name"},
                                                                  {"state", "State"},
                                                                  {"architecture", "Architecture"},
                                                                  {"owner-id", "OwnerId"}};
        const bool ok =
            passes_filters(params.value("Filters", json::array()),
                           [&](const std::string& f) -> std::optional<std::vector<std::string>> {
                               auto it = kField.find(f);
                               if (it == kField.end()) return std::nullopt;
                               return std::vector<std::string>{image[it->second]};
                           });
        if (ok) out.push_back(image);
    }
    return {{"Images", out}};
}

}  // namespace sky::test

namespace sky::test {

void FakeEc2::release_host(const std::string& instance_id) {
    // The machine is gone: everything on it stops (sshd too, until the host is handed out again).
    if (binding_) binding_->release(instance_id);
}

int FakeEc2::host_of(const std::string& instance_id) const {
    const auto h = binding_ ? binding_->host_of(instance_id) : std::nullopt;
    return h ? *h : -1;
}

void FakeEc2::set_instance_state(const std::string& instance_id, const std::string& name,
                                 const std::string& reason_code) {
    std::lock_guard lock(mutex_);
    auto it = instances_.find(instance_id);
    if (it == instances_.end()) return;
    static const std::map<std::string, int> codes = {{"pending", 0},        {"running", 16},
                                                     {"shutting-down", 32}, {"terminated", 48},
                                                     {"stopping", 64},      {"stopped", 80}};
    it->second["State"] = json{{"Code", codes.count(name) ? codes.at(name) : 0}, {"Name", name}};
    if (!reason_code.empty())
        it->second["StateReason"] = {{"Code", reason_code}, {"Message", reason_code}};
    if (name == "terminated" || name == "shutting-down") {
        it->second.erase("PublicIpAddress");
        release_host(instance_id);
    }
    if (name == "terminated") interface_outlives(it->second);
}

void FakeEc2::interface_outlives(const json& instance) {
    if (options_.interface_linger.count() <= 0) return;
    LingeringInterface i;
    for (const auto& g : instance.value("SecurityGroups", json::array()))
        i.groups.push_back(g.value("GroupId", ""));
    i.until = std::chrono::steady_clock::now() + options_.interface_linger;
    interfaces_.push_back(std::move(i));
}

json FakeEc2::delete_security_group(const json& params) {
    std::lock_guard lock(mutex_);
    std::string id = params.value("GroupId", "");
    if (id.empty()) {
        for (const auto& [gid, group] : security_groups_)
            if (group["GroupName"] == params.value("GroupName", "")) id = gid;
    }
    if (!security_groups_.count(id)) {
        fail(400, "InvalidGroup.NotFound",
             fmt::format("The security group '{}' does not exist", id));
    }
    // As on EC2: not while a terminated instance's network interface is still there.
    std::erase_if(interfaces_, [](const LingeringInterface& i) {
        return i.until <= std::chrono::steady_clock::now();
    });
    for (const auto& i : interfaces_)
        if (std::find(i.groups.begin(), i.groups.end(), id) != i.groups.end())
            fail(400, "DependencyViolation", fmt::format("resource {} has a dependent object", id));
    // Nor while a live instance uses it.
    for (const auto& [iid, instance] : instances_) {
        const std::string st = instance["State"]["Name"];
        if (st == "terminated") continue;
        for (const auto& g : instance.value("SecurityGroups", json::array())) {
            if (g.value("GroupId", "") == id) {
                fail(400, "DependencyViolation",
                     fmt::format("resource {} has a dependent object", id));
            }
        }
    }
    security_groups_.erase(id);
    return {{"Return", true}};
}

}  // namespace sky::test
