// Package window is a sliding-window Bloom filter: it answers "was x added
// within the last N inserts" (a count window) or "within the last T
// milliseconds" (a time window), with no false negatives inside the
// window and a false-positive rate bounded forever, in memory fixed at
// creation. It is the algorithm core of bfserver's BFX.W* filters (issue
// #27); it holds no server state, does no I/O and never reads a clock:
// every operation takes now (unix ms) from the caller, in bfserver the
// time the proposer stamped on the command, so every replica computes the
// same thing.
//
// # Algorithm
//
// An Age-Partitioned Bloom Filter (Shtul, Baquero, Almeida, "Age-
// Partitioned Bloom Filters", arXiv 2001.03147): k+l slices of m bits, in
// a ring ordered by age. An insert sets one bit (its own hash) in each of
// the k youngest slices. Every generation, the oldest slice is cleared and
// becomes the youngest (a shift). A query answers present if k consecutive
// slices, any k, hold the item's bit: an item inserted s generations ago
// occupies ages s..s+k−1, all of them intact while s ≤ l. The scan tests
// each candidate run's oldest slice first and skips past a clear bit, so a
// negative costs about 2(k+l)/k probes.
//
// A generation is g inserts (count windows), or d ms of the caller's
// clock (time windows), boundaries at multiples of d since the epoch. An
// item's bit in physical slice p is the MurmurHash3 finaliser of a + p·b
// (a, b: engine.BloomHash64, RedisBloom's two MurmurHash64A values)
// reduced by multiply-high; it depends on the physical slice, not the
// age, so the bits stay findable as slices age. Plain (or enhanced)
// double hashing was measured 18–27% above the predicted rate with slices
// of a few hundred bits; mixed, the measured rate matches the prediction
// (TestTimeWindowFalsePositives).
//
// Time: an operation first applies the generations elapsed since the
// filter's last time (⌊now/d⌋ − ⌊last/d⌋ shifts; k+l or more clear the
// array once, so an idle filter costs one pass however long it slept). A
// now earlier than the last time is taken as the last time: time never
// moves backwards, so a leader with a slower clock cannot resurrect or
// age anything; inserts made while a clock catches up all count in the
// current generation. Exists and Info never modify the filter: they apply
// pending generations virtually (skipping the slices those shifts would
// clear), so a read at time t answers what a write at t would then see.
//
// Add returns whether the item was new, i.e. not already reported present
// (BF.ADD's 0/1), and inserts it in either case, so re-adding an item
// keeps it in the window. Every Add counts as an insert of a count window.
//
// # Sizing
//
// Options give an error rate ε and a window: N inserts, or T ms with a
// capacity C (the inserts expected in any T; a time window's memory must
// be provisioned for a rate, like BF.RESERVE's capacity). With n = N or C:
//
//	g = ⌈n / l⌉                inserts per generation
//	d = ⌈T / l⌉                ms per generation (time windows)
//	fill of the slice at age i, worst case (end of a generation, steady state):
//	    f_i = 1 − (1 − 1/m)^(min(i+1, k)·g)
//	ε(k, l, m) = P(some k consecutive of k+l independent Bernoulli(f_i) succeed)
//
// ε(k, l, m) is computed exactly by the recurrence F[i] = F[i−1] +
// (1 − f_{i−k−1})·∏_{j=i−k}^{i−1} f_j·(1 − F[i−k−1]) (the first run ends at
// i−1), in O(k+l). Fills only grow with inserts (clearing only lowers
// them), and ε grows with every fill, so ε(k, l, m) bounds the rate of a
// never-added item at any fill, forever, in expectation over the hash as
// for any Bloom filter. Size picks the (k, l, m) of least memory with
// ε(k, l, m) ≤ ε: for each k, a ternary search over l on the continuous
// cost, bisection for the largest load g/m, exact sizing of the l around
// the optimum (slices are whole 64-bit words). The paper instead fixes
// each slice's final fill at ½, m = k·g/ln 2; that point is sized as a
// candidate for every k too (PaperSize), so the result never takes more
// memory than the paper's design (TestSizingMeetsRateAndPaper). Sizing
// costs 10–250 ms (BenchmarkSize); results are cached per (ε, n).
//
// # Guarantees and margins
//
//   - No false negatives inside the window: an item survives l shifts
//     after its own generation. Count window: l·g ≥ N later inserts, so
//     any of the last N inserts is present. Time window (KeepTime, the
//     default): l·d ≥ T, so an item added at t is present at any now with
//     now − t < T (by the filter's clock), whatever the rate.
//   - The rate bound holds while no generation takes more than g inserts:
//     always for a count window; for a time window while the rate stays
//     within the capacity. Above it, KeepTime keeps every item for T and
//     its rate rises (Info.EstimatedFP reports the rate at the current
//     fills); KeepRate starts a generation early once the current one has
//     taken g inserts, so the rate stays bounded at any rate and items may
//     leave before T (an item is kept for l shifts, clock boundaries and
//     early shifts together).
//   - Forgetting: after more than l generations an item has fewer than k
//     intact slices and is found only if neighbouring slices hold its bit
//     by chance, which falls off geometrically; after k+l generations
//     none of its bits remain and it is exactly a never-added item.
//     Info.Guaranteed is l·g inserts (l·d ms), Info.Forgotten (k+l)·g
//     ((k+l)·d ms). Forgotten/N = (k+l)/l·l·g/N is 1.25 at ε = 1%, N = 10³;
//     1.18 at 1%, 10⁷; 1.12 at 0.1%; 1.09 at 0.01%; 1.06 at 10⁻⁶. Measured
//     (TestCountWindowForgets, ε = 1%, N = 5000): recall 1.0 at age N,
//     0.52 at 1.02 N, 0.09 at 1.05 N, 0.01 at 1.09 N, ≈ ε beyond 1.14 N.
//
// # Memory
//
//	bytes = (k + l) · ⌈m/64⌉ · 8       the bit array
//	      + 8 · (k + l)                a count of set bits per slice
//	      + about 200                  the struct
//
// The counts are derived (not in the dump): they make Info's fills O(k+l)
// rather than a pass over the bits. The bits below are the bit array's;
// the counts add 64 bits per slice per filter, under 0.1% from n = 10⁵,
// but as much as the bits at n = 10.
//
// The paper's design needs (k + l)·k·n/(l·ln 2) bits: (k+l)/l times a
// plain Bloom filter of k hashes holding n items, whose own size for rate
// 2^−k is n·k/ln 2 bits. Bits per item of the window (from Size; the
// paper's point in parentheses; a plain, never-forgetting Bloom filter
// of the same rate; two rotating Bloom filters at ε/2 each, the
// RedisBloom workaround):
//
//	ε       n      k   l    bits/item       plain   rotating pair
//	1%      10³    10  42   19.97 (34.82)   9.59    22.06
//	1%      10⁵    11  58   19.61 (19.70)
//	1%      10⁷    11  62   19.59 (19.70)
//	0.1%    10⁵    15  125  25.72 (25.79)   14.38   31.64
//	0.01%   10⁵    20  231  31.49 (31.49)   19.17   41.23
//	10⁻⁶    10⁵    26  422  42.43 (42.64)   28.76   60.40
//
// At large n the free fill saves under 1% against the paper's ½; at small
// n, where slices round up to whole words, up to 43%. The rotating pair
// remembers anywhere between N and 2N inserts (its edge jumps by N at each
// rotation); the window's edge moves by g, N/l, and it takes 11–30% less
// memory.
//
// # Dump format
//
// Version 1, little-endian: a HeaderSize-byte header (magic "BFXW",
// version, kind, overflow policy, k, l, head slice, words per slice, ε,
// window, capacity, g, d, generation, inserts in the generation, inserts,
// last time, data size, CRC-32C; layout in dump.go), then the bit array,
// slices in physical order, words little-endian. Marshal (DUMP/RESTORE,
// COPY, BFX.DIGEST) appends a CRC-32C of the whole. bfserver's image
// stores the header as a key's metadata and the bit array in 64 KiB
// chunks, of which a flush writes those changed (Dirty marks them, before
// every change: an add's bits, a shift's cleared slice, LoadChunk's
// range). ScanDump/Chunks give the
// header at cursor 1 and the bit array in chunks whose cursor is 1 + the
// offset after them; LoadHeader and LoadChunk (LOADCHUNK) take them back.
// The decoders check every field (ranges, kind/policy consistency, the
// window guarantee l·g ≥ N and l·d ≥ T, head < k+l, size = (k+l)·words·8),
// refuse a size over the caller's cap before allocating, and compare the
// size with the input's length first; any bit pattern is a valid state,
// so chunks need only a range check. Digest is the SHA-256 of Marshal;
// replicas that applied the same operations have equal digests.
//
// # Cost
//
// Measured (BenchmarkAdd, BenchmarkExists, medians of 3, 2 shared
// cores), against engine's Bloom filter of the same rate and capacity,
// hashing included:
//
//	ε, N           window Add / Exists present / absent   Bloom
//	1%, 10⁵        207 / 124 / 163 ns                      39 / 42 / 36 ns
//	0.1%, 10⁶      456 / 242 / 363 ns                      62 / 70 / 50 ns
//
// Marking each bit's chunk for the image and counting the slices' set
// bits (both since the chunked image) cost an Add about 14% at 1%, 10⁵
// (medians of 10 interleaved runs: 278 → 318 ns; minima 235 → 269) and
// nothing measurable at 0.1%, 10⁶, where the cache misses dominate;
// marked conditionally (only a bit that was clear), as engine's Bloom
// filter does, it cost 40%: the branch mispredicts at the fills in use.
//
// An Add is a query (for its answer) plus k bit sets; a query probes about
// 2(k+l)/k slices, each probe a dependent load and a mispredicted branch
// half the time. The blocked variant of the paper (2–3 cache lines per
// operation) is the known way to close part of this gap; it is not
// implemented.
//
// State and locks: none owned. A Filter is not safe for concurrent use;
// Exists and Info do not write, so readers may share it while no Add or
// LoadChunk runs.
package window
