package resp

// Go runs a package's init functions in the order its files are presented
// to the compiler (sorted by name), so this one runs after every command
// was registered.
func init() { initStats() }
