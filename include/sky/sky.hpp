#pragma once
/// \file The umbrella header: everything a sky program needs.
// What the programs of the API contract (docs/api.md) use with this header alone, though sky's
// own headers do not need it: std::reduce (docs/api.md §1).
#include <numeric>

#include "sky/accelerator.hpp"
#include "sky/catalog.hpp"
#include "sky/compute.hpp"
#include "sky/distributed.hpp"
#include "sky/errors.hpp"
#include "sky/events.hpp"
#include "sky/image.hpp"
#include "sky/init.hpp"
#include "sky/instance.hpp"
#include "sky/map.hpp"
#include "sky/pending.hpp"
#include "sky/pool.hpp"
#include "sky/providers.hpp"
#include "sky/shard.hpp"
#include "sky/spot.hpp"
#include "sky/volume.hpp"
