// Package movein moves filters into bfserver and out of it again:
//
//   - Migrate (bfserver migrate) copies every Bloom and Cuckoo key from one
//     server that speaks RedisBloom's BF/CF SCANDUMP and LOADCHUNK to another
//     (RedisBloom to bfserver, bfserver to RedisBloom, or between two
//     bfservers), chunk by chunk, verified, resumable, keeping TTLs.
//   - Load (bfserver load) builds a filter from a list of items (stdin, a
//     file, or a PostgreSQL query) in a temporary key and RENAMEs it over the
//     live one, so readers see the old filter until the new one is complete;
//     a lock key lets one load of a key run at a time, and a mark on its
//     temporary keys (an expiry of its own) fails a load whose key another
//     client deleted or replaced, rather than publish it.
//
// It exists so that adopting bfserver, rebuilding a filter from the system
// of record, and leaving again are each one command. It is a client: it
// talks to servers only over the Redis protocol (go-redis), so it works
// against any RedisBloom-compatible server. Of the server's packages it
// uses only the pure filter layers (scalable, engine), to build a filter in
// process whose dump is byte for byte RedisBloom's; docs/MIGRATING.md
// describes the procedures and their guarantees.
package movein
