package command

// MaxPiece bounds the data of a LOADCHUNK in one log entry. A log entry is
// held several times on its way to the disk (raft-boltdb encodes it into a
// buffer that grows by doubling, and bbolt rewrites a leaf page of up to
// four such entries), so a 16 MB chunk in one entry costs some 100 MB of
// transient memory; split into pieces of 1 MiB it costs a few.
const MaxPiece = 1 << 20

// Splits reports whether Pieces splits c: a data chunk of more than
// MaxPiece bytes. A header, or a chunk LOADCHUNK refuses anyway for its
// position, goes to the log as it is.
func Splits(c *Cmd) bool {
	n := int64(len(c.Data))
	return (c.Op == BFLoadChunk || c.Op == CFLoadChunk) && n > MaxPiece && c.Iter > 1 && c.Iter >= n
}

// Pieces splits a data LOADCHUNK (BF or CF, iterator past the header)
// whose data exceeds MaxPiece into pieces of at most MaxPiece bytes, in
// the order they are to be written, each for an entry of its own. It
// returns nil for every other command. The pieces share c's data.
//
// Written in order, the pieces leave the filter as the chunk would, and
// the first is refused exactly when the chunk would be (see BFLoadPart).
// Unlike the chunk they are not one write: a reader may see the chunk
// half written, and another client's write may land between two pieces.
func Pieces(c *Cmd) []Cmd {
	if !Splits(c) {
		return nil
	}
	op := BFLoadPart
	if c.Op == CFLoadChunk {
		op = CFLoadPart
	}
	n := int64(len(c.Data))
	out := make([]Cmd, 0, (n+MaxPiece-1)/MaxPiece)
	for from := int64(0); from < n; from += MaxPiece {
		to := min(from+MaxPiece, n)
		out = append(out, Cmd{
			Op: op, DB: c.DB, Now: c.Now, Key: c.Key, MaxBytes: c.MaxBytes,
			Data:  c.Data[from:to:to],
			Iter:  c.Iter - (n - to), // where a LOADCHUNK of these bytes alone points
			Count: n - from,
		})
	}
	return out
}
