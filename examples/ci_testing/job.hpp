#pragma once
// A small batch job, written so that its failure handling can be tested: it scores items on a
// pool, each chunk re-run on another node when its node is lost, and turns the errors a cloud
// produces into a message and an exit status.
#include <iosfwd>
#include <sky/sky.hpp>
#include <vector>

namespace job {

/// What one run produced.
struct Result {
    long total = 0;  ///< the sum of every item's score
    int items = 0;   ///< how many items were scored
};

/// An item's score.
long score(int item);
/// The sum of the scores of a chunk of items (runs on a node).
long score_chunk(std::vector<int> chunk);

/// Scores items 0..items-1 on `pool`; a chunk whose node is lost runs again on another node.
Result run(sky::ComputePool& pool, int items);

/// The whole program: a pool from `spec`, the run, a line on `out`. Returns the exit status:
/// 0 done, 1 a bad configuration (SKY_SIMULATED included), 2 no capacity anywhere, 3 a node could
/// not be set up, 4 a node was lost for good.
int main_with(sky::PoolSpec spec, int items, std::ostream& out);

}  // namespace job
