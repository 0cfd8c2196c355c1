package server

// Go runs a package's init functions in the order its files are presented
// to the compiler (sorted by name), so this one runs after every command
// was registered: the operators' commands complete the table (they extend
// containers other files register), then every command gets its counters
// and its flags.
func init() {
	registerAdmin()
	initStats()
	initAdmin()
}
