// Package tdigest is RedisBloom 8.8.0's t-digest (the TDIGEST.* commands)
// as a pure Go package: the same sequence of TDIGEST.CREATE, ADD, MERGE
// and RESET leaves bit-identical state, and every query answers the same
// numbers, as RedisBloom on Redis 8.0-m01. It does no I/O, reads no clock
// and draws no randomness, and knows nothing of the protocol: the server
// package parses the commands' arguments, and maps the package's errors
// (errors.go) to RedisBloom's replies.
//
// # Algorithm
//
// A merging t-digest (Dunning's MergingDigest as in RedisBloom's
// t-digest-c fork): a Digest is td_histogram_t — compression c, min, max,
// capacity 6c+10 (a C int), merged and unmerged node counts, merged and
// unmerged weight, total compressions, and node arrays of (mean, weight).
// ADD appends each value as a unit-weight node to the buffer after the
// merged centroids; when merged+unmerged reaches capacity−1, compress runs
// first. Compress sorts all nodes by mean and sweeps them left to right,
// folding node i into the current centroid while z = (w_cur+w_i)·c /
// (2π·W·ln W) is at most q(1−q) at both the centroid's left quantile q0
// and its new right quantile q2 (W the total weight), so centroids are
// small at the tails and large in the middle. Quantiles interpolate
// between centroid centres (singletons count as exact points, min and max
// as the outermost samples); CDF is the inverse walk; TRIMMED_MEAN sums
// centroid means weighted by their share of the kept range.
//
// # What matches RedisBloom, and why it must
//
// Every answer depends on when compress ran and on every bit it computed:
// a compress over 30 buffered values then 600 more gives other centroids
// than one over all 630. So the package reproduces, not approximates:
//
//   - The t-digest-c version 8.8.0 links (read from its machine code):
//     td_qsort (middle pivot, Lomuto partition — its order among equal
//     means that carry different weights decides which nodes merge, so no
//     other sort will do; sortNodes is it, with a linear shortcut for a
//     range of one repeated value that gives the same permutation), no
//     refusal of non-finite means in td_add, and compress leaving the
//     buffer unmerged when the total weight is at most 1: a digest holding
//     one value answers nan to QUANTILE and CDF (but not to MIN and MAX).
//   - When compress runs: in ADD and MERGE when the buffer is full; in
//     QUANTILE, CDF, TRIMMED_MEAN; in RANK/REVRANK only for a value within
//     [min, max], in BYRANK/BYREVRANK only for a rank in (0, count); in
//     MERGE on every source (sources change) and on the old destination
//     unless OVERRIDE; in DUMP (RedisBloom's rdb_save compresses the live
//     key). MIN, MAX, INFO and MEMORY USAGE never compress. A query that
//     compresses changes the digest (INFO's Merged nodes and Total
//     compressions, and every later centroid), so in bfserver it is a
//     write: it must be applied in log order on every replica.
//     NeedsCompress tells when a query is a pure read.
//   - Floating point operation for operation: products that C adds
//     separately are rounded with float64() so no platform fuses them
//     into an FMA; C's ternary min/max (not math.Min/Max, whose NaN rules
//     differ); double-to-long-long casts as x86-64's cvttsd2si (cvtt); and
//     log as glibc computes it (glibcLog: Go's math.Log differs in the last
//     bit for 0.6% of integers, enough to flip a merge).
//   - Capacity wraps as C's int does: compressions from 357913940 give a
//     negative capacity, and such a digest refuses every value with
//     "overflow detected", as RedisBloom's does (ErrOverflow).
//
// What the server adds (argument parsing in RedisBloom's order of checks,
// its error strings, Redis's number grammar and double formatting in
// internal/redisnum) is tested there: TestOracleTDigest replays this
// package's captures (testdata/, see its README: a transcript of every
// command, option and error in RESP2 and RESP3, random sessions,
// 50 000-value streams, DUMP payloads) through the server, every reply
// byte-identical, TestOracleTDigestFormat its 3 800 double formats, and
// TestTDigestLiveDifferential, run against a live RedisBloom, compares
// thousands of random sessions reply for reply and moves digests both
// ways through DUMP/RESTORE. Here, TestMemUsageCapture checks MemUsage
// against the captures.
//
// # Encodings
//
// AppendRDB/FromRDB are RedisBloom's module value (type TDIS-TYPE,
// encoding version 0): compression, min, max; capacity, node counts,
// total compressions as signed integers; merged and unmerged weight; the
// merged means, then the merged weights, as doubles. It is lossy — only
// merged nodes are written, so a one-value digest comes back as one
// unmerged node of mean 0 and weight 0 (RedisBloom's own behaviour, kept)
// — and RedisBloom compresses before writing it. Marshal/Unmarshal are
// bfserver's exact dump (every field and node, CRC-32C), for images and
// snapshots, where a replica must get back exactly the state it saved.
// Both decoders check every field, refuse states RedisBloom never writes
// (a capacity not its compression's, node counts outside [0, capacity]),
// compare sizes with the input before allocating, and take a byte cap.
//
// # Memory
//
// RedisBloom allocates both node arrays at creation: 80 + 16·(6c+10)
// bytes per key whatever it holds (MemUsage, INFO's Memory usage; MEMORY
// USAGE adds the key's overhead, the same as for a Bloom key):
//
//	compression   1     10     100    1000    10000     100000
//	bytes        336   1200   9840   96240   960240   9600240
//
// A Digest grows its arrays as nodes arrive, up to that size (Footprint):
// an empty digest holds none, a full one what RedisBloom holds. After a
// compress of 200 000 values at compression 100, 62–65 centroids remain
// (TestAccuracyTails); the buffer refills to 6c+10 nodes before the next.
//
// # Accuracy
//
// A centroid around quantile q holds at most q(1−q)·2π·W·ln W/c values, so
// the rank error is at most about q(1−q)·π·ln W/c of W. Measured on
// 200 000 uniform, normal and exponential values at c = 100
// (TestAccuracyTails): rank errors 0–7.5e-5 at q = 0.001 and 0.999, at most
// 4.7e-3 at the median, all within 17% of that bound.
//
// # Cost
//
// Measured (BenchmarkAdd and others, 2 shared cores): ADD 270–390 ns a
// value at compression 100 and 1000 (the sort in compress dominates);
// QUANTILE of 3 fractions on a 100 000-value digest 0.4–0.9 µs; MERGE of
// two such digests 10–17 µs; Redis's double formatting 250 ns. td_qsort
// is quadratic on duplicate-heavy buffers: the compress of a buffer of one
// repeated value (60 008 nodes at compression 10000) took RedisBloom 9.7 s
// and takes sortNodes' shortcut 1.1 ms (6 008 at compression 1000: 50 ms
// and 0.19 ms), and with 1% of the values different, 3.7 s and 1.2 ms.
// Other duplicate-heavy buffers can keep RedisBloom's cost, at most
// (6c+10)²/2 comparisons per compress (186 000 at compression 100).
package tdigest
