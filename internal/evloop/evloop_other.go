//go:build !linux

package evloop

import (
	"errors"
	"net"
)

// Supported reports whether this platform has the event loop.
const Supported = false

var (
	errUnsupported = errors.New("evloop: not supported on this platform")
	// ErrClosed: the connection was closed.
	ErrClosed = errors.New("evloop: connection closed")
)

// Group is not available off Linux.
type Group struct{}

// Conn is not available off Linux.
type Conn struct{ Context any }

func Start(Handler, Options) (*Group, error)              { return nil, errUnsupported }
func (g *Group) Stop()                                    {}
func (g *Group) Adopt(net.Conn) (*Conn, error)            { return nil, errUnsupported }
func (c *Conn) Start()                                    {}
func (c *Conn) Fd() int                                   { return -1 }
func (c *Conn) Loop() int                                 { return 0 }
func (c *Conn) Write([]byte) error                        { return errUnsupported }
func (c *Conn) Buffered() int                             { return 0 }
func (c *Conn) Reserve(int)                               {}
func (c *Conn) Input() []byte                             { return nil }
func (c *Conn) Consume(int, bool)                         {}
func (c *Conn) Resume()                                   {}
func (c *Conn) End()                                      {}
func (c *Conn) KeepInput()                                {}
func (c *Conn) Close()                                    {}
func (c *Conn) Detach() (net.Conn, []byte, []byte, error) { return nil, nil, nil, errUnsupported }
