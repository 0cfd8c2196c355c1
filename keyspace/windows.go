package keyspace

import (
	"errors"
	"strconv"
	"sync"
	"unsafe"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/sketch/window"
)

// Window is a sliding-window filter as a key holds it (BFX.W*). Reads run
// beside Apply and a window's Add changes more than single bits (a shift
// clears a slice and moves the ring), so its own lock orders them: Apply
// takes it to change the filter, readers share it.
//
// In the image a window is a Bloom filter's like: its dump header as
// metadata, its bit array (one part) in 64 KiB chunks, of which a flush
// writes those the filter marked changed (window.Filter.Dirty), and a cut
// holds the array and has Apply copy a chunk before it changes one,
// within the cut's budget (engine.Freeze).
type Window struct {
	mu sync.RWMutex
	f  *window.Filter
}

// WindowValue makes a Value of a window filter.
func WindowValue(f *window.Filter) *Value {
	return &Value{Kind: KindWindow, obj: unsafe.Pointer(&Window{f: f})}
}

// Window is the value's window filter, nil unless it is one.
func (v *Value) Window() *Window {
	if v.Kind != KindWindow {
		return nil
	}
	return (*Window)(v.obj)
}

// Marshal is the filter's full state (window.Marshal), under its lock.
func (w *Window) Marshal() []byte {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.f.Marshal()
}

// Info describes the filter as of now (BFX.WINFO's figures), under its
// lock; it costs O(k+l), no pass over the bits.
func (w *Window) Info(now int64) window.Info {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.f.Info(now)
}

// header is the filter's dump header (its metadata in the image).
func (w *Window) header() []byte {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.f.Header()
}

// Bytes is the filter's memory: its bits and its struct.
func (w *Window) Bytes() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.f.MemoryBytes()
}

func mapWindow(err error) error {
	switch {
	case errors.Is(err, window.ErrTooLarge):
		return ErrTooLarge
	case errors.Is(err, window.ErrCorrupt), errors.Is(err, window.ErrShape):
		return ErrBadData
	case errors.Is(err, window.ErrCursor):
		return ErrNoLink
	}
	return ErrInvalidCommand
}

// newWindow is the filter c describes, of the shape its proposer sized
// (command.Validate checked the parameters; window.New checks the shape
// against them).
func newWindow(c *command.Cmd) (*Value, error) {
	s, err := command.DecodeShape(c.Data)
	if err != nil {
		return nil, ErrInvalidCommand
	}
	o := window.Options{ErrorRate: c.ErrorRate, Kind: window.Kind(c.Field), Now: c.Now, MaxBytes: c.MaxBytes, Shape: &s}
	if o.Kind == window.Count {
		o.Count = uint64(c.Iter)
	} else {
		o.WindowMs, o.Capacity = c.Iter, c.Capacity
		if c.Flag {
			o.Overflow = window.KeepRate
		}
	}
	f, err := window.New(o)
	if err != nil {
		return nil, mapWindow(err)
	}
	return WindowValue(f), nil
}

func (k *Keyspace) wReserve(c *command.Cmd) Result {
	return k.reserve(c, KindWindow, func(c *command.Cmd) (*Value, string, error) {
		v, err := newWindow(c)
		return v, string(c.Key), err
	})
}

func (k *Keyspace) wAdd(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindWindow)
	if err != nil {
		return Result{Err: err}
	}
	if v == nil {
		if c.NoCreate || len(c.Data) == 0 {
			return Result{Err: ErrNotFound}
		}
		if v, err = newWindow(c); err != nil {
			return Result{Err: err}
		}
		k.set(c.DB, string(c.Key), v)
	}
	w := v.Window()
	r := Result{Ints: make([]int64, len(c.Items))}
	w.mu.Lock()
	for i, it := range c.Items {
		r.Ints[i] = b2i(w.f.Add(it, c.Now))
	}
	w.mu.Unlock()
	k.changed(c.DB, c.Key)
	return r
}

// wLoadChunk is BFX.WLOADCHUNK: cursor 1 with a header creates the key
// (absent keys only, as BF.LOADCHUNK), a later cursor writes bits.
func (k *Keyspace) wLoadChunk(c *command.Cmd) Result {
	v, err := k.lookupKind(c, KindWindow)
	if err != nil {
		return Result{Err: err}
	}
	if c.Iter == 1 {
		if v != nil {
			return Result{Err: ErrItemExists}
		}
		f, err := window.LoadHeader(c.Data, c.MaxBytes)
		if err != nil {
			return Result{Err: mapWindow(err)}
		}
		k.set(c.DB, string(c.Key), WindowValue(f))
		return Result{}
	}
	if v == nil {
		return Result{Err: ErrNotFound}
	}
	w := v.Window()
	w.mu.Lock()
	err = w.f.LoadChunk(c.Iter, c.Data)
	w.mu.Unlock()
	if err != nil {
		return Result{Err: mapWindow(err)}
	}
	k.changed(c.DB, c.Key)
	return Result{}
}

// readWindow answers the window reads, beside Apply.
func (k *Keyspace) readWindow(c *command.Cmd) Result {
	v, err := ofKind(k.Lookup(c.DB, c.Key, c.Now), KindWindow)
	if err != nil {
		return Result{Err: err}
	}
	if c.Op == command.WExists {
		r := Result{Ints: make([]int64, len(c.Items)), Found: v != nil}
		if v == nil {
			return r
		}
		w := v.Window()
		w.mu.RLock()
		for i, it := range c.Items {
			r.Ints[i] = b2i(w.f.Exists(it, c.Now))
		}
		w.mu.RUnlock()
		return r
	}
	if v == nil {
		return Result{Err: ErrNotFound}
	}
	w := v.Window()
	w.mu.RLock()
	defer w.mu.RUnlock()
	if c.Op == command.WInfo {
		return listResult(WindowInfo(w.f.Info(c.Now)))
	}
	next, data := w.f.ScanDump(c.Iter, int(min(c.Count, window.MaxChunk)))
	return Result{Int: next, More: bytesMore(data), Null: data == nil}
}

// WindowInfo is BFX.WINFO's fields as name, value pairs, values in their
// decimal text, in Result.List: a read inside EXEC crosses nodes in
// EncodeResults, which carries List already, so the window needs no new
// result field. The server package renders each by its name's type
// (WindowInfoDouble, or a string, or an integer).
func WindowInfo(in window.Info) [][]byte {
	maxFill := 0.0
	for _, f := range in.Fill {
		maxFill = max(maxFill, f)
	}
	u := func(n uint64) []byte { return strconv.AppendUint(nil, n, 10) }
	d := func(f float64) []byte { return strconv.AppendFloat(nil, f, 'g', 17, 64) }
	return [][]byte{
		[]byte("Window type"), []byte(in.Kind.String()),
		[]byte("Window"), u(in.Window),
		[]byte("Capacity"), u(in.Capacity),
		[]byte("Error rate"), d(in.ErrorRate),
		[]byte("Overflow"), []byte(in.Overflow.String()),
		[]byte("Size"), u(in.MemoryBytes),
		[]byte("Inserts"), u(in.Inserts),
		[]byte("Hash functions"), u(uint64(in.K)),
		[]byte("Slices"), u(uint64(in.K + in.L)),
		[]byte("Slice bits"), u(in.SliceBits),
		[]byte("Generation size"), u(in.GenerationSize),
		[]byte("Generation ms"), u(uint64(in.GenerationMs)),
		[]byte("Generation"), u(in.Generation),
		[]byte("Max fill"), d(maxFill),
		[]byte("Estimated false positive rate"), d(in.EstimatedFP),
		[]byte("Max false positive rate"), d(in.MaxFP),
		[]byte("Guaranteed"), u(in.Guaranteed),
		[]byte("Forgotten after"), u(in.Forgotten),
	}
}

// WindowInfoDouble reports whether a BFX.WINFO field is a double; the
// string fields are "Window type" and "Overflow", the rest integers.
func WindowInfoDouble(name string) bool {
	switch name {
	case "Error rate", "Max fill", "Estimated false positive rate", "Max false positive rate":
		return true
	}
	return false
}

// cloneWindow is COPY's copy of a window: its full state, decoded again
// (the dump's own length bounds what decoding it allocates).
func cloneWindow(w *Window) (*Value, error) {
	b := w.Marshal()
	f, err := window.Unmarshal(b, uint64(len(b)))
	if err != nil {
		return nil, ErrBadData
	}
	return WindowValue(f), nil
}
