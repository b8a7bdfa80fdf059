#pragma once
/// \file The umbrella header: everything a sky program needs.
// The standard containers a program may send (api.md §1) that sky's own headers do not need:
// reachable from here, as when cereal's support for them brought them in.
#include <deque>
#include <list>
#include <set>
#include <unordered_map>
#include <unordered_set>

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
