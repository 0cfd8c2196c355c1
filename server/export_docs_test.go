package server

// Registered reports whether the command table has a command by full name
// ("bf.add", "config|get").
func Registered(full string) bool {
	sp, _ := lookupFull([]byte(full))
	return sp != nil
}

// HasSubcommands reports whether a command is a container (CONFIG, ACL).
func HasSubcommands(name string) bool {
	sp := commandTable()[name]
	return sp != nil && len(sp.subs) > 0
}
