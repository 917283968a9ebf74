#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/memory/allocator.h"

using namespace memsim;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * 1024;
constexpr std::uint64_t GiB = 1024 * MiB;

std::unique_ptr<Allocator> make(const std::string& name, std::uint64_t capacity) {
  return make_allocator(name, nullptr, capacity, capacity);
}

// A tiled tier's parameters as its YAML entry gives them.
Params tile_params(const std::string& entry) {
  return allocator_params(*find_allocator("tiled"), ConfigNode::parse_text(entry, "test"), {});
}

std::unique_ptr<Allocator> make_tiled(std::uint64_t tiles, std::uint64_t tile_bytes,
                                      std::uint64_t grain = 64, std::uint64_t cap = UINT64_MAX) {
  const Params p = tile_params(
      fmt::format("{{tiles: {}, tile_capacity: {}B, grain: {}B}}", tiles, tile_bytes, grain));
  return make_allocator("tiled", &p, tiles * tile_bytes, cap);
}

// allocated, reserved, largest free block
void expect_state(const Allocator& a, std::uint64_t allocated, std::uint64_t reserved,
                  std::uint64_t largest, const char* step) {
  EXPECT_EQ(a.allocated_bytes(), allocated) << step;
  EXPECT_EQ(a.reserved_bytes(), reserved) << step;
  EXPECT_EQ(a.largest_free_block(), largest) << step;
}

}  // namespace

TEST(AllocRegistry, KnowsAllFourAndRejectsOthers) {
  for (const char* n : {"ideal", "best_fit", "caching", "tiled"}) EXPECT_TRUE(find_allocator(n)) << n;
  EXPECT_FALSE(find_allocator("buddy"));
  EXPECT_THROW(make("buddy", 100), std::invalid_argument);
}

TEST(AllocRegistry, EachAllocatorAppliesACap) {
  for (const char* n : {"ideal", "best_fit", "caching"}) {
    EXPECT_EQ(make_allocator(n, nullptr, 100, 40)->capacity_bytes(), 40u) << n;
    EXPECT_EQ(make_allocator(n, nullptr, 100, 400)->capacity_bytes(), 100u) << n;
  }
}

TEST(AllocRegistry, TiledParametersAreDeclaredAndChecked) {
  const AllocatorInfo* tiled = find_allocator("tiled");
  ASSERT_TRUE(tiled);
  std::vector<std::string> names;
  for (const auto& p : tiled->params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tiles", "tile_capacity", "grain"}));
  EXPECT_THROW(tile_params("{tile_capacity: 1KiB}"), InputError);  // tiles is required
  EXPECT_THROW(tile_params("{tiles: 4, tile_capacity: 1KiB, colour: red}"), InputError);
  EXPECT_THROW(
      {
        const Params zero = tile_params("{tiles: 0, tile_capacity: 1KiB}");
        make_allocator("tiled", &zero, 0, 0);
      },
      InputError);
  // Without the tier's parameters a tiled allocator has no tiles to make.
  EXPECT_THROW(make("tiled", 100), InputError);
}

// ---------------------------------------------------------------- best_fit

TEST(AllocBestFit, CoalescesNeighboursOnRelease) {
  auto a = make("best_fit", 100);
  auto x = *a->allocate(30);  // [0,30)
  auto y = *a->allocate(30);  // [30,60)
  auto z = *a->allocate(40);  // [60,100): full
  EXPECT_EQ(x.address, 0u);
  EXPECT_EQ(y.address, 30u);
  EXPECT_EQ(z.address, 60u);
  EXPECT_EQ(a->largest_free_block(), 0u);
  a->release(x);  // holes [0,30)
  EXPECT_EQ(a->largest_free_block(), 30u);
  a->release(z);  // holes [0,30) [60,100): no neighbours free yet
  EXPECT_EQ(a->largest_free_block(), 40u);
  a->release(y);  // [0,30) + [30,60) + [60,100) = one hole of 100
  EXPECT_EQ(a->largest_free_block(), 100u);
  auto all = a->allocate(100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->address, 0u);
}

TEST(AllocBestFit, TakesTheSmallestHoleThenTheLowestAddress) {
  auto a = make("best_fit", 100);
  auto h1 = *a->allocate(20);  // [0,20)
  a->allocate(10);             // [20,30)
  auto h2 = *a->allocate(30);  // [30,60)
  a->allocate(10);             // [60,70); [70,100) stays free (30)
  a->release(h1);
  a->release(h2);
  // Holes: [0,20) 20, [30,60) 30, [70,100) 30.
  EXPECT_EQ(a->allocate(15)->address, 0u);   // 20 is the smallest hole >= 15
  EXPECT_EQ(a->allocate(25)->address, 30u);  // [15,20) is 5; two holes of 30: lowest address
  EXPECT_EQ(a->allocate(30)->address, 70u);
  // Two holes of 5 B left, [15,20) and [55,60): the lower one first; 6 B fits in neither.
  EXPECT_EQ(a->allocate(5)->address, 15u);
  EXPECT_FALSE(a->allocate(6));
  EXPECT_EQ(a->allocate(5)->address, 55u);
}

TEST(AllocBestFit, NoRoundingAndZeroBytesAlwaysFit) {
  auto a = make("best_fit", 100);
  EXPECT_EQ(a->allocate(7)->bytes, 7u);
  a->allocate(93);
  auto z = a->allocate(0);  // full, yet an empty buffer fits
  ASSERT_TRUE(z);
  EXPECT_EQ(z->bytes, 0u);
  a->release(*z);
  EXPECT_EQ(a->allocated_bytes(), 100u);
}

TEST(AllocBestFit, FragmentationIsNamedWithBothFigures) {
  auto a = make("best_fit", 100);
  auto p = *a->allocate(25);  // [0,25)
  a->allocate(25);            // [25,50)
  auto r = *a->allocate(25);  // [50,75)
  a->allocate(25);            // [75,100)
  a->release(p);
  a->release(r);
  // 50 B free in two holes of 25: 40 fits by total but not in any hole.
  EXPECT_EQ(a->allocated_bytes(), 50u);
  EXPECT_EQ(a->largest_free_block(), 25u);
  EXPECT_FALSE(a->allocate(40));
  EXPECT_EQ(a->failure_reason(40), "fragmentation: 50 B free in total but the largest hole is 25 B");
  EXPECT_EQ(a->allocated_bytes(), 50u);  // a failed request changes nothing
  // 60 > 50 free: simply full, no reason.
  EXPECT_EQ(a->failure_reason(60), "");
}

// ---------------------------------------------------------------- caching

TEST(AllocCaching, RoundsUpTo512Bytes) {
  auto a = make("caching", GiB);
  EXPECT_EQ(a->allocate(1)->bytes, 512u);
  EXPECT_EQ(a->allocate(512)->bytes, 512u);
  EXPECT_EQ(a->allocate(513)->bytes, 1024u);
  // 512 + 512 + 1024 live in one small 2 MiB segment.
  EXPECT_EQ(a->allocated_bytes(), 2048u);
  EXPECT_EQ(a->reserved_bytes(), 2 * MiB);
}

TEST(AllocCaching, SegmentSizeFollowsTheRequestSize) {
  struct Case {
    std::uint64_t request, segment, block;
  };
  for (Case c : {
           // <= 1 MiB: small pool, 2 MiB segment; the 1 MiB remainder (>= 512 B) is split off.
           Case{1 * MiB, 2 * MiB, 1 * MiB},
           // 1 MiB + 1 B rounds to 1 MiB + 512: large pool, below 10 MiB: 20 MiB segment.
           Case{1 * MiB + 1, 20 * MiB, 1 * MiB + 512},
           Case{5 * MiB, 20 * MiB, 5 * MiB},
           // 10 MiB - 512 is still below 10 MiB: 20 MiB; 10 MiB itself gets its own size.
           Case{10 * MiB - 512, 20 * MiB, 10 * MiB - 512},
           Case{10 * MiB, 10 * MiB, 10 * MiB},
           // 11 MiB -> 12 MiB segment; the 1 MiB remainder is not > 1 MiB: no split, the
           // whole 12 MiB block is handed out.
           Case{11 * MiB, 12 * MiB, 12 * MiB},
           // 19 MiB - 512 -> 20 MiB segment; remainder 1 MiB + 512 > 1 MiB: split.
           Case{19 * MiB - 512, 20 * MiB, 19 * MiB - 512},
       }) {
    auto a = make("caching", GiB);
    auto x = a->allocate(c.request);
    ASSERT_TRUE(x) << c.request;
    EXPECT_EQ(a->reserved_bytes(), c.segment) << c.request;
    EXPECT_EQ(x->bytes, c.block) << c.request;
    EXPECT_EQ(a->allocated_bytes(), c.block) << c.request;
  }
}

TEST(AllocCaching, SmallRequestsShareA2MiBSegment) {
  auto a = make("caching", GiB);
  a->allocate(1 * MiB);  // new 2 MiB segment, split: 1 MiB left
  a->allocate(1 * MiB);  // the remainder
  EXPECT_EQ(a->reserved_bytes(), 2 * MiB);
  a->allocate(512);  // nothing cached left: a second 2 MiB segment
  EXPECT_EQ(a->reserved_bytes(), 4 * MiB);
}

TEST(AllocCaching, SplitThresholdsPerPool) {
  auto a = make("caching", GiB);
  auto x = *a->allocate(5 * MiB);  // 20 MiB segment, split: 5 MiB + 15 MiB free
  a->release(x);                   // merges back: one free 20 MiB block, still reserved
  EXPECT_EQ(a->reserved_bytes(), 20 * MiB);
  EXPECT_EQ(a->allocated_bytes(), 0u);
  // 19.5 MiB from the cached 20 MiB block: remainder 0.5 MiB <= 1 MiB, no split.
  auto y = *a->allocate(19 * MiB + 512 * KiB);
  EXPECT_EQ(y.bytes, 20 * MiB);
  EXPECT_EQ(a->reserved_bytes(), 20 * MiB);
  a->release(y);
  // 5 MiB from it: remainder 15 MiB > 1 MiB, split; the 15 MiB serves the next request.
  EXPECT_EQ(a->allocate(5 * MiB)->bytes, 5 * MiB);
  EXPECT_EQ(a->allocate(15 * MiB)->bytes, 15 * MiB);
  EXPECT_EQ(a->reserved_bytes(), 20 * MiB);

  // Small pool: a remainder of exactly 512 B is split off.
  auto s = make("caching", GiB);
  s->allocate(1 * MiB);  // 2 MiB segment: 1 MiB left
  EXPECT_EQ(s->allocate(1 * MiB - 512)->bytes, 1 * MiB - 512);  // 512 B left, split off
  EXPECT_EQ(s->allocate(512)->bytes, 512u);                     // and used
  EXPECT_EQ(s->reserved_bytes(), 2 * MiB);
  EXPECT_EQ(s->allocated_bytes(), 2 * MiB);
}

TEST(AllocCaching, ReservedPeakExceedsAllocatedPeak) {
  auto a = make("caching", GiB);
  std::uint64_t peak_allocated = 0, peak_reserved = 0;
  auto track = [&] {
    peak_allocated = std::max(peak_allocated, a->allocated_bytes());
    peak_reserved = std::max(peak_reserved, a->reserved_bytes());
  };
  // Segment S1 (20 MiB) = [a 5][b 5][free 10].
  auto x = *a->allocate(5 * MiB);  // allocated 5, reserved 20
  track();
  auto y = *a->allocate(5 * MiB);  // from S1's remainder: allocated 10, reserved 20
  track();
  a->release(x);  // S1 = [free 5][b 5][free 10]: allocated 5, reserved 20
  track();
  // 12 MiB fits neither cached hole (5, 10): new 12 MiB segment S2.
  auto z = *a->allocate(12 * MiB);  // allocated 17, reserved 32
  track();
  EXPECT_EQ(z.bytes, 12 * MiB);
  a->release(y);  // S1 all free, still cached: allocated 12, reserved 32
  track();
  // 300 KiB is a small request: the cached 20 MiB block is in the large pool, so a new
  // 2 MiB segment S3 is taken: allocated 12 MiB + 300 KiB, reserved 34.
  a->allocate(300 * KiB);
  track();
  EXPECT_EQ(a->allocated_bytes(), 12 * MiB + 300 * KiB);
  EXPECT_EQ(a->reserved_bytes(), 34 * MiB);
  EXPECT_EQ(peak_allocated, 17 * MiB);
  EXPECT_EQ(peak_reserved, 34 * MiB);
  EXPECT_EQ(peak_reserved - peak_allocated, 17 * MiB);
}

TEST(AllocCaching, ReleasingCachedSegmentsAvoidsAnOom) {
  auto a = make("caching", 40 * MiB);
  // 15 MiB >= 10 MiB: segment rounded to 16 MiB; remainder 1 MiB is not > 1 MiB, so the
  // whole 16 MiB block is given.
  auto x = *a->allocate(15 * MiB);
  EXPECT_EQ(x.bytes, 16 * MiB);
  a->release(x);
  EXPECT_EQ(a->reserved_bytes(), 16 * MiB);  // cached
  // 30 MiB needs a 30 MiB segment; 40 - 16 = 24 MiB unreserved is too little. Releasing the
  // idle 16 MiB segment leaves 40 MiB: the retry succeeds.
  auto y = a->allocate(30 * MiB);
  ASSERT_TRUE(y);
  EXPECT_EQ(y->bytes, 30 * MiB);
  EXPECT_EQ(a->reserved_bytes(), 30 * MiB);
  EXPECT_EQ(a->allocated_bytes(), 30 * MiB);
}

TEST(AllocCaching, OomWithCachedBlocksTooSmallKeepsTheCache) {
  auto a = make("caching", 40 * MiB);
  a->allocate(5 * MiB);                // S1 20 MiB: 5 live, 15 free but stuck in S1
  auto small = *a->allocate(1 * KiB);  // S2 2 MiB
  a->release(small);                   // S2 idle: releasable
  EXPECT_EQ(a->reserved_bytes(), 22 * MiB);
  // 30 MiB needs a 30 MiB segment: 18 MiB unreserved, 20 MiB even after releasing S2: fails,
  // and S2 is kept since releasing it would not have helped.
  EXPECT_FALSE(a->allocate(30 * MiB));
  EXPECT_EQ(a->reserved_bytes(), 22 * MiB);
  EXPECT_EQ(a->allocated_bytes(), 5 * MiB);
  // 30 MiB <= 40 - 5 free: not plainly full. S1's 15 MiB are cached but unusable.
  EXPECT_EQ(a->failure_reason(30 * MiB),
            "15 MiB reserved in cached blocks too small for the request, and 20 MiB unreserved "
            "is less than the 30 MiB segment it needs");
  // 36 MiB > 35 MiB free: simply full.
  EXPECT_EQ(a->failure_reason(36 * MiB), "");
}

TEST(AllocCaching, SegmentSizeCanMakeASmallerRequestFail) {
  auto a = make("caching", 30 * MiB);
  a->allocate(12 * MiB);  // 12 MiB segment, whole block: 18 MiB unreserved
  // An 18 MiB request gets an 18 MiB segment, but 5 MiB needs a 20 MiB one.
  EXPECT_EQ(a->largest_free_block(), 18 * MiB);
  EXPECT_FALSE(a->allocate(5 * MiB));
  EXPECT_EQ(a->failure_reason(5 * MiB),
            "18 MiB unreserved is less than the 20 MiB segment the request needs");
  EXPECT_TRUE(a->allocate(18 * MiB));
}

TEST(AllocCaching, BlocksHaveDistinctAddresses) {
  auto a = make("caching", GiB);
  auto x = *a->allocate(1 * KiB);
  auto y = *a->allocate(1 * KiB);
  auto z = *a->allocate(5 * MiB);
  EXPECT_EQ(y.address, x.address + 1 * KiB);  // split from the same segment
  EXPECT_GE(z.address, x.address + 2 * MiB);  // another segment, past the first
}

// ---------------------------------------------------------------- tiled

TEST(AllocTiled, SpreadsEvenlyAndWrapsRound) {
  auto a = make_tiled(4, 100);  // grain 64 B
  // 100 B: ceil(100/64) = 2 tiles, 50 each, tiles 0-1.
  auto x = *a->allocate(100);
  EXPECT_EQ(x.bytes, 100u);
  EXPECT_EQ(x.address % 4, 0u);
  // 10 B: one tile, tile 2.
  auto y = *a->allocate(10);
  EXPECT_EQ(y.bytes, 10u);
  EXPECT_EQ(y.address % 4, 2u);
  // 130 B: ceil(130/64) = 3 tiles, ceil(130/3) = 44 each (132 B), tiles 3, 0, 1.
  auto z = *a->allocate(130);
  EXPECT_EQ(z.bytes, 132u);
  EXPECT_EQ(z.address % 4, 3u);
  EXPECT_EQ(a->allocated_bytes(), 100u + 10 + 132);
  // Tiles hold 94, 94, 10, 44.
  a->release(x);  // 44, 44, 10, 44
  EXPECT_EQ(a->allocated_bytes(), 142u);
  EXPECT_EQ(a->tile_peaks(), (std::vector<std::uint64_t>{94, 94, 10, 44}));
  // A large buffer takes every tile: 1000 B over 4 tiles would need 250 each: too much.
  EXPECT_FALSE(a->allocate(1000));
}

TEST(AllocTiled, FitsByTotalButNotPerTileNamesTheTile) {
  auto a = make_tiled(4, 100);
  std::vector<Allocation> one;
  for (int i = 0; i < 4; ++i) one.push_back(*a->allocate(64));  // 64 B on each of tiles 0-3
  a->release(one[0]);
  a->release(one[1]);
  a->release(one[3]);
  // Tiles hold 0, 0, 64, 0; the next start is tile 0. 256 B over 4 tiles is 64 each: 336 B
  // free in total, but tile 2 has only 36 B left.
  EXPECT_FALSE(a->allocate(256));
  EXPECT_EQ(a->failure_reason(256), "tile 2 needs 64 B more but holds 64 B of 100 B");
  EXPECT_EQ(a->allocated_bytes(), 64u);
  // From tile 0: 128 B on tiles 0-1 fits; 129 B spreads over 3 tiles, 43 on tile 2: no.
  EXPECT_EQ(a->largest_free_block(), 128u);
  EXPECT_FALSE(a->allocate(129));
  auto ok = a->allocate(128);  // the failures left the start at tile 0
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->address % 4, 0u);
  EXPECT_EQ(a->tile_peaks(), (std::vector<std::uint64_t>{64, 64, 64, 64}));
}

TEST(AllocTiled, GrainAndTileCountBoundTheSpread) {
  auto a = make_tiled(8, 1000, 100);
  EXPECT_EQ(a->allocate(250)->bytes, 252u);    // 3 tiles (grain 100) x 84
  EXPECT_EQ(a->allocate(2000)->bytes, 2000u);  // 20 grains but 8 tiles: 250 each
  EXPECT_EQ(a->tile_peaks(), (std::vector<std::uint64_t>{334, 334, 334, 250, 250, 250, 250, 250}));
}

TEST(AllocTiled, CapacityIsAtMostWhatTheTilesHold) {
  const Params p = tile_params("{tiles: 4, tile_capacity: 100B}");
  EXPECT_THROW(make_allocator("tiled", &p, 500, 500), std::invalid_argument);
  EXPECT_EQ(make_allocator("tiled", &p, 400, 400)->capacity_bytes(), 400u);
  // A capacity a budget lowered: each tile holds a quarter of it.
  EXPECT_EQ(make_allocator("tiled", &p, 300, 300)->capacity_bytes(), 300u);
}

TEST(AllocTiled, ACapShrinksEachTileInProportion) {
  auto a = make_tiled(4, 100, 100, 250);  // 250 / 4 tiles: 62 B each
  EXPECT_EQ(a->capacity_bytes(), 248u);
  EXPECT_TRUE(a->allocate(62));
  EXPECT_FALSE(a->allocate(63));  // the next tile has 62 B
  EXPECT_EQ(a->tile_peaks(), (std::vector<std::uint64_t>{62, 0, 0, 0}));
  EXPECT_EQ(make_tiled(4, 100, 100, 3)->capacity_bytes(), 4u);  // 1 B per tile at least
  EXPECT_EQ(make_tiled(4, 100, 100, 1000)->capacity_bytes(), 400u);  // a cap above: no change
}

// ---------------------------------------------------------------- one scenario, each allocator

TEST(AllocCounters, BestFit) {
  auto a = make("best_fit", 100);
  expect_state(*a, 0, 0, 100, "start");
  auto x = *a->allocate(30);  // [0,30)
  expect_state(*a, 30, 30, 70, "x");
  auto y = *a->allocate(50);  // [30,80)
  expect_state(*a, 80, 80, 20, "y");
  a->release(x);  // holes [0,30) [80,100)
  expect_state(*a, 50, 50, 30, "free x");
  a->allocate(25);  // 20 is too small: [0,25); holes [25,30) [80,100)
  expect_state(*a, 75, 75, 20, "z");
  a->release(y);  // [25,30) + [30,80) + [80,100)
  expect_state(*a, 25, 25, 75, "free y");
}

TEST(AllocCounters, Caching) {
  auto a = make("caching", 64 * MiB);
  // Nothing cached; 64 MiB unreserved serves a 64 MiB request.
  expect_state(*a, 0, 0, 64 * MiB, "start");
  // 20 MiB segment, split: 17 MiB free block; 44 MiB unreserved is larger.
  auto x = *a->allocate(3 * MiB);
  expect_state(*a, 3 * MiB, 20 * MiB, 44 * MiB, "x");
  // 40 MiB segment; 4 MiB unreserved only serves small requests (1 MiB): the 17 MiB block.
  auto y = *a->allocate(40 * MiB);
  expect_state(*a, 43 * MiB, 60 * MiB, 17 * MiB, "y");
  // 100 KiB: a 2 MiB small segment.
  auto z = *a->allocate(100 * KiB);
  expect_state(*a, 43 * MiB + 100 * KiB, 62 * MiB, 17 * MiB, "z");
  a->release(y);  // cached 40 MiB block
  expect_state(*a, 3 * MiB + 100 * KiB, 62 * MiB, 40 * MiB, "free y");
  a->release(x);  // merges into a cached 20 MiB block
  expect_state(*a, 100 * KiB, 62 * MiB, 40 * MiB, "free x");
  // 50 MiB: 2 MiB unreserved; releasing the idle 20 and 40 MiB segments leaves 62 MiB. Then
  // 12 MiB unreserved; the small segment's 2 MiB - 100 KiB serves at most 1 MiB.
  a->allocate(50 * MiB);
  expect_state(*a, 50 * MiB + 100 * KiB, 52 * MiB, 12 * MiB, "w");
  (void)z;
}

TEST(AllocCounters, Tiled) {
  auto a = make_tiled(4, 100);  // grain 64
  // From tile 0, all 4 tiles free: 400 B at 100 per tile.
  expect_state(*a, 0, 0, 400, "start");
  auto x = *a->allocate(100);  // tiles 0-1, 50 each; next start 2
  // From tile 2 (rooms 100, 100, 50, 50): 3 tiles x 50 = 150 (> 2 grains), 4 x 50 = 200.
  expect_state(*a, 100, 100, 200, "x");
  a->allocate(200);  // 4 tiles, 50 each from tile 2: tiles hold 100, 100, 50, 50; next 2
  // From tile 2 (rooms 50, 50, 0): 2 tiles x 50 = 100.
  expect_state(*a, 300, 300, 100, "y");
  a->release(x);  // 50 on every tile
  expect_state(*a, 200, 200, 200, "free x");
  EXPECT_EQ(a->tile_peaks(), (std::vector<std::uint64_t>{100, 100, 50, 50}));
}
