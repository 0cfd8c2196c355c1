package server

import (
	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
)

// STRLEN, for the plain strings SET makes: redis-cli --bigkeys sizes
// string keys with it.
func registerStrlen() {
	keyCmd("strlen", 2, []string{"readonly", "fast"}, []string{"@read", "@string", "@fast"}, 1, 1, 1,
		parseKeyOnly(command.Get), func(w *resp.Writer, c *command.Cmd, r *keyspace.Result) { w.Int(int64(len(r.Bytes()))) })
}
