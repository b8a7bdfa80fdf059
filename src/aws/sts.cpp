#include "aws/sts.hpp"

#include "aws/ec2_client.hpp"
#include "util/env.hpp"

namespace sky::detail::aws {

std::string sts_endpoint_override(std::string* source) {
    for (const char* name : {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
        if (std::string v = env_or(name); !v.empty()) {
            if (source) *source = name;
            return v;
        }
    }
    return {};
}

TemporaryCredentials get_federation_token(const Credentials& caller,
                                          const FederationRequest& request,
                                          const std::string& region) {
    Ec2ClientConfig c;
    c.region = region.empty() ? "us-east-1" : region;
    c.service = "sts";
    c.api_version = std::string(kStsApiVersion);
    c.endpoint = sts_endpoint_override(&c.endpoint_source);
    c.credentials = caller;
    Ec2Client client(std::move(c));
    QueryParams p;
    p.set("Name", request.name);
    p.set("Policy", request.policy);
    p.set("DurationSeconds", static_cast<long long>(request.duration.count()));
    const XmlElement root = client.call("GetFederationToken", p);
    const XmlElement* result = root.child("GetFederationTokenResult");
    const XmlElement* creds = result ? result->child("Credentials") : nullptr;
    TemporaryCredentials out;
    if (creds) {
        out.credentials.access_key_id = creds->child_text("AccessKeyId");
        out.credentials.secret_access_key = creds->child_text("SecretAccessKey");
        out.credentials.session_token = creds->child_text("SessionToken");
        out.expiration = creds->child_text("Expiration");
    }
    if (out.credentials.access_key_id.empty() || out.credentials.secret_access_key.empty() ||
        out.credentials.session_token.empty())
        throw XmlError("STS GetFederationToken: the answer holds no complete credentials");
    return out;
}

}  // namespace sky::detail::aws
