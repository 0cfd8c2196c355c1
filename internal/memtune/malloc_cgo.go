//go:build cgo && linux

package memtune

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
// A constructor runs when the program is loaded, before the Go runtime
// starts its threads: glibc fixes the arena limit at the first thread's
// first malloc, and a mallopt from Go's init comes too late for that.
__attribute__((constructor)) static void bf_malloc_arenas(void) { mallopt(M_ARENA_MAX, 1); }
static void bf_malloc_trim(void) { malloc_trim(0); }
#else
static void bf_malloc_trim(void) {}
#endif
*/
import "C"

// With cgo, Pebble allocates its memtables and block cache with C's malloc
// (its internal/manual), outside the Go heap. glibc gives each thread that
// mallocs an arena of its own and keeps what is freed inside an arena for
// later: 3.5-7.5 MB across three or four arenas after 100,000 small
// filters had been flushed, against a 1 MiB memtable and a 2 MiB cache.
// One arena, and a trim with every release, keep C's share at what Pebble
// holds.
func trimC() { C.bf_malloc_trim() }
