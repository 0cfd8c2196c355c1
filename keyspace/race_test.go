//go:build race

package keyspace

// raceOn: the race detector is on, and slows the large tests tenfold;
// they keep the parts that run beside Apply.
const raceOn = true
