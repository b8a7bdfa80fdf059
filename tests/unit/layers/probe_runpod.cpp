// Compiled as a source of the RunPod adapter (with its include path, tests/unit/layers): the
// cloud layer and the REST client compile; another cloud's code (the EC2 client) is not found.
#include "providers/cloud/cloud_backend.hpp"
#include "providers/rest/json_api.hpp"
#ifndef SKY_COMPILE_OK
#include "aws/ec2_client.hpp"
#endif

int main() {}
