package cmdinfo

// windowArgs is a window: COUNT n, or EX seconds / PX milliseconds with
// CAPACITY n.
var windowArgs = Arg{Name: "window", Type: "oneof", Args: []Arg{
	{Name: "count", Type: "integer", Display: "count", Token: "COUNT"},
	{Name: "time", Type: "block", Args: []Arg{
		{Name: "unit", Type: "oneof", Args: []Arg{
			{Name: "seconds", Type: "integer", Display: "seconds", Token: "EX"},
			{Name: "milliseconds", Type: "integer", Display: "milliseconds", Token: "PX"},
		}},
		{Name: "capacity", Type: "integer", Display: "capacity", Token: "CAPACITY"},
	}},
}}

var (
	docKey     = Arg{Name: "key", Type: "key", Display: "key", KeySpec: 1}
	docItem    = Arg{Name: "item", Type: "string", Display: "item"}
	docItems   = Arg{Name: "item", Type: "string", Display: "item", Flags: []string{"multiple"}}
	docKeepRat = Arg{Name: "keeprate", Type: "pure-token", Display: "keeprate", Token: "KEEPRATE", Flags: []string{"optional"}}
)

// ownDocs describes the commands only bfserver has, in Redis's shape.
var ownDocs = map[string]*Doc{
	"bfx.wreserve": {
		Summary:    "Creates a sliding-window Bloom filter: it keeps the last N inserts, or the inserts of the last T",
		Since:      "1.0.0",
		Group:      "bf",
		Complexity: "O(1)",
		Args:       []Arg{docKey, {Name: "error_rate", Type: "double", Display: "error_rate"}, windowArgs, docKeepRat},
	},
	"bfx.wadd": {
		Summary: "Adds an item to a sliding-window filter", Since: "1.0.0", Group: "bf", Complexity: "O(k)",
		Args: []Arg{docKey, docItem},
	},
	"bfx.wmadd": {
		Summary: "Adds one or more items to a sliding-window filter", Since: "1.0.0", Group: "bf", Complexity: "O(k * n), where n is the number of items",
		Args: []Arg{docKey, docItems},
	},
	"bfx.winsert": {
		Summary: "Adds one or more items to a sliding-window filter, creating it with the given window if it does not exist", Since: "1.0.0", Group: "bf",
		Complexity: "O(k * n), where n is the number of items",
		Args: []Arg{docKey,
			{Name: "error_rate", Type: "double", Display: "error_rate", Token: "ERROR", Flags: []string{"optional"}},
			{Name: "window", Type: "oneof", Flags: []string{"optional"}, Args: windowArgs.Args},
			docKeepRat,
			{Name: "nocreate", Type: "pure-token", Display: "nocreate", Token: "NOCREATE", Flags: []string{"optional"}},
			{Name: "items", Type: "pure-token", Display: "items", Token: "ITEMS"},
			docItems},
	},
	"bfx.wexists": {
		Summary: "Checks whether an item was added to a sliding-window filter within its window", Since: "1.0.0", Group: "bf", Complexity: "O(k + l)",
		Args: []Arg{docKey, docItem},
	},
	"bfx.wmexists": {
		Summary: "Checks whether one or more items were added to a sliding-window filter within its window", Since: "1.0.0", Group: "bf",
		Complexity: "O((k + l) * n), where n is the number of items",
		Args:       []Arg{docKey, docItems},
	},
	"bfx.winfo": {
		Summary: "Returns information about a sliding-window filter: its window, fill, estimated false-positive rate and memory", Since: "1.0.0", Group: "bf",
		Complexity: "O(m), where m is the size of the filter",
		Args:       []Arg{docKey},
	},
	"bfx.wscandump": {
		Summary: "Begins an incremental save of a sliding-window filter", Since: "1.0.0", Group: "bf", Complexity: "O(n), where n is the capacity",
		Args: []Arg{docKey, {Name: "iterator", Type: "integer", Display: "iterator"}},
	},
	"bfx.wloadchunk": {
		Summary: "Restores a sliding-window filter previously saved using BFX.WSCANDUMP", Since: "1.0.0", Group: "bf", Complexity: "O(n), where n is the capacity",
		Args: []Arg{docKey, {Name: "iterator", Type: "integer", Display: "iterator"}, {Name: "data", Type: "string", Display: "data"}},
	},
	"bfx.digest": {
		Summary:    "Returns a digest of the full state of a Bloom or Cuckoo filter as this node holds it",
		Since:      "1.0.0",
		Group:      "generic",
		Complexity: "O(n), where n is the size of the filter",
		Args:       []Arg{{Name: "key", Type: "key", Display: "key", KeySpec: 1}},
	},
	"consistency": {
		Summary:    "Shows or sets the read consistency of the connection",
		Since:      "1.0.0",
		Group:      "connection",
		Complexity: "O(1)",
		Args: []Arg{{Name: "level", Type: "oneof", Flags: []string{"optional"}, Args: []Arg{
			{Name: "linearizable", Type: "pure-token", Display: "linearizable", Token: "LINEARIZABLE"},
			{Name: "stale", Type: "pure-token", Display: "stale", Token: "STALE"},
		}}},
	},
	"bfcluster": {
		Summary:    "A container for cluster membership commands",
		Since:      "1.0.0",
		Group:      "cluster",
		Complexity: "Depends on subcommand.",
	},
	"bfcluster|join": {
		Summary:    "Adds a node to the cluster",
		Since:      "1.0.0",
		Group:      "cluster",
		Complexity: "O(1)",
		Args: []Arg{
			{Name: "node-id", Type: "string", Display: "node-id"},
			{Name: "raft-address", Type: "string", Display: "host:port"},
			{Name: "resp-address", Type: "string", Display: "host:port"},
		},
	},
	"bfcluster|remove": {
		Summary:    "Removes a node from the cluster",
		Since:      "1.0.0",
		Group:      "cluster",
		Complexity: "O(1)",
		Args:       []Arg{{Name: "node-id", Type: "string", Display: "node-id"}},
	},
	"bfcluster|members": {
		Summary:    "Lists the members of the cluster",
		Since:      "1.0.0",
		Group:      "cluster",
		Complexity: "O(N) where N is the number of members",
	},
}
