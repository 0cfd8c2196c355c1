// Package scalable grows single filters from engine into RedisBloom's
// scalable Bloom chains and Cuckoo sub-filter sets, and encodes and decodes
// their SCANDUMP/LOADCHUNK and RDB (DUMP/RESTORE) formats byte for byte.
//
// Flows: Chain.Add tests every link and adds to the newest, appending a link
// (capacity × expansion, error × ½) when it is full (Chain.AddMany hashes
// each item once and loads its bits a few items ahead); Cuckoo.Insert
// tries every sub-filter, kicks out in the newest, and grows by a
// power-of-two expansion. Decoders validate headers as RedisBloom 8 does
// and refuse any filter over the caller's byte cap before allocating.
//
// State and locks: a Chain swaps its link list atomically, so Test never
// locks; a Cuckoo filter holds an RWMutex, since a kick-out moves
// fingerprints that a reader must not look between.
//
// Trade-offs: a chain's item count is derived from its links; legacy 32-bit
// and power-of-two links load and answer, but new filters never use them.
// A loaded Cuckoo header may declare an expansion CF.RESERVE would round
// to a power of two; its sizes are kept, and its sub-filters that are not
// engine.CuckooTable.Regular take no kick-out, so that no acknowledged add
// is lost where RedisBloom's own filter loses them (docs/COMMANDS.md).
package scalable
