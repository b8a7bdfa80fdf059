#pragma once
/// \file The first line of main (docs/api.md §0).
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// In a worker process (started by a pool with a worker flag) this serves calls and never
/// returns; in the client it records that sky is initialised and returns at once.
void init(int argc, char** argv);

/// True in a worker process.
bool is_worker() noexcept;

SKY_PUBLIC_END
