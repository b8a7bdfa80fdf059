// The adapter conformance suite (support/adapter_conformance.hpp) over every REST cloud's fake:
// each scenario once per cloud, without root or SSH.
#include <tuple>

#include "unit/providers/digitalocean/conformance.hpp"
#include "unit/providers/runpod/conformance.hpp"
#include "unit/providers/vastai/conformance.hpp"
#include "unit/providers/verda/conformance.hpp"

using ConformingClouds =
    std::tuple<sky::test::conformance::DigitalOceanCloud, sky::test::conformance::RunPodCloud,
               sky::test::conformance::VastCloud, sky::test::conformance::VerdaCloud>;
using RetiringClouds =
    std::tuple<sky::test::conformance::DigitalOceanCloud, sky::test::conformance::RunPodCloud,
               sky::test::conformance::VerdaCloud>;

#include "support/adapter_conformance.hpp"
