package scalable

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
)

const noCap = 1 << 40

// opt finds a named option's value anywhere in args, as RedisBloom scans.
func opt(args [][]byte, name string, def uint64) uint64 {
	for i, a := range args {
		if strings.EqualFold(string(a), name) && i+1 < len(args) {
			v, _ := strconv.ParseUint(string(args[i+1]), 10, 64)
			return v
		}
	}
	return def
}

func hasArg(args [][]byte, name string) bool {
	for _, a := range args {
		if strings.EqualFold(string(a), name) {
			return true
		}
	}
	return false
}

func itemsAfter(args [][]byte) [][]byte {
	for i, a := range args {
		if strings.EqualFold(string(a), "ITEMS") {
			return args[i+1:]
		}
	}
	return nil
}

// replay runs a recipe on the engine directly: the recipes use well-formed
// commands only, so this interpreter needs none of the server's parsing.
func replay(t *testing.T, r golden.Recipe) (*Chain, *Cuckoo) {
	var ch *Chain
	var cf *Cuckoo
	var err error
	for _, c := range r.Recipe {
		a := c.Argv()
		switch strings.ToUpper(string(a[0])) {
		case "BF.RESERVE":
			e, _ := strconv.ParseFloat(string(a[2]), 64)
			capa, _ := strconv.ParseUint(string(a[3]), 10, 64)
			ch, err = NewChain(capa, min(e, 0.25), uint32(opt(a, "EXPANSION", 2)),
				hasArg(a, "NONSCALING") || opt(a, "EXPANSION", 2) == 0, noCap)
		case "BF.ADD", "BF.MADD", "BF.INSERT":
			items := a[2:]
			if strings.EqualFold(string(a[0]), "BF.INSERT") {
				items = itemsAfter(a)
			}
			if ch == nil {
				o := a[:len(a)-len(items)]
				e := 0.01
				for i := range o {
					if strings.EqualFold(string(o[i]), "ERROR") {
						e, _ = strconv.ParseFloat(string(o[i+1]), 64)
					}
				}
				ch, err = NewChain(opt(o, "CAPACITY", 100), e, uint32(opt(o, "EXPANSION", 2)),
					hasArg(o, "NONSCALING"), noCap)
			}
			for _, it := range items {
				if _, err := ch.Add(it, noCap); err != nil {
					break
				}
			}
		case "CF.RESERVE":
			capa, _ := strconv.ParseUint(string(a[2]), 10, 64)
			cf, err = NewCuckoo(CuckooParams{Capacity: capa,
				BucketSize:    uint16(opt(a, "BUCKETSIZE", 2)),
				MaxIterations: uint16(opt(a, "MAXITERATIONS", 20)),
				Expansion:     uint16(opt(a, "EXPANSION", 1))}, noCap)
		case "CF.ADD", "CF.ADDNX", "CF.INSERT", "CF.INSERTNX":
			cmd := strings.ToUpper(string(a[0]))
			items := a[2:]
			if strings.HasPrefix(cmd, "CF.INSERT") {
				items = itemsAfter(a)
			}
			if cf == nil {
				cf, err = NewCuckoo(CuckooParams{Capacity: opt(a[:len(a)-len(items)], "CAPACITY", 1024),
					BucketSize: 2, MaxIterations: 20, Expansion: 1}, noCap)
			}
			if cf.Info().NumFilters >= 32 {
				continue
			}
			for _, it := range items {
				cf.Insert(it, strings.HasSuffix(cmd, "NX"), noCap)
			}
		case "CF.DEL":
			cf.Delete(a[2])
		case "CF.COMPACT":
			cf.Compact()
		default:
			t.Fatalf("%s: unexpected recipe command %q", r.Name, a[0])
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", r.Name, a[0], err)
		}
	}
	return ch, cf
}

func wantChunks(t *testing.T, r golden.Recipe) (pos []int64, data [][]byte, nulls []bool) {
	for _, p := range r.Scandump {
		pos = append(pos, int64(p[0].(float64)))
		if p[1] == nil {
			data = append(data, nil)
			nulls = append(nulls, true)
			continue
		}
		b, err := hex.DecodeString(p[1].(string))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
		nulls = append(nulls, false)
	}
	return
}

// dump produces SCANDUMP's sequence of (iterator, bytes) for either kind.
func dump(ch *Chain, cf *Cuckoo) (pos []int64, data [][]byte) {
	if ch != nil {
		pos, data = append(pos, 1), append(data, ch.Header())
		for it := int64(1); ; {
			next, b := ch.Chunk(it)
			pos, data = append(pos, next), append(data, b)
			if next == 0 {
				return
			}
			it = next
		}
	}
	if cf.Items() == 0 {
		return []int64{0}, [][]byte{nil}
	}
	pos, data = append(pos, 1), append(data, cf.Header())
	for it := int64(1); ; {
		next, b, ok := cf.Chunk(it)
		pos, data = append(pos, next), append(data, b)
		if !ok {
			return
		}
		it = next
	}
}

func TestGoldenDumps(t *testing.T) {
	recipes, err := golden.LoadRecipes()
	if err != nil {
		t.Fatal(err)
	}
	if len(recipes) < 50 {
		t.Fatalf("only %d recipes loaded", len(recipes))
	}
	for _, r := range recipes {
		t.Run(r.Name, func(t *testing.T) {
			ch, cf := replay(t, r)
			wpos, wdata, _ := wantChunks(t, r)
			gpos, gdata := dump(ch, cf)
			if len(gpos) != len(wpos) {
				t.Fatalf("dump has %d chunks, want %d", len(gpos), len(wpos))
			}
			for i := range wpos {
				if gpos[i] != wpos[i] || hex.EncodeToString(gdata[i]) != hex.EncodeToString(wdata[i]) {
					t.Fatalf("chunk %d: got (%d, %x) want (%d, %x)", i, gpos[i], head(gdata[i]), wpos[i], head(wdata[i]))
				}
			}
			var info map[string]any
			if err := json.Unmarshal(r.Info, &info); err != nil {
				t.Fatal(err)
			}
			var debug any
			if ch != nil {
				debug = ch.Debug()
				if got := float64(ch.MemUsage()); got != info["Size"].(float64) {
					t.Errorf("Size %v want %v", got, info["Size"])
				}
			} else {
				debug = []string{cf.Debug()}
				if got := float64(cf.Info().Size); got != info["Size"].(float64) {
					t.Errorf("Size %v want %v", got, info["Size"])
				}
			}
			gj, _ := json.Marshal(debug)
			var wd any
			_ = json.Unmarshal(r.Debug, &wd)
			wj, _ := json.Marshal(wd)
			if string(gj) != string(wj) {
				t.Errorf("debug %s\nwant %s", gj, r.Debug)
			}
			// Load the golden dump into a fresh filter and dump it again.
			lch, lcf := load(t, r.Type, wpos, wdata)
			gpos, gdata = dump(lch, lcf)
			for i := range wpos {
				if gpos[i] != wpos[i] || hex.EncodeToString(gdata[i]) != hex.EncodeToString(wdata[i]) {
					t.Fatalf("reloaded chunk %d differs", i)
				}
			}
			checkProbes(t, r, lch, lcf)
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 300)] }

func load(t *testing.T, typ string, pos []int64, data [][]byte) (*Chain, *Cuckoo) {
	if pos[0] == 0 {
		return nil, nil
	}
	if typ == "bf" {
		ch, err := ParseChainHeader(data[0], noCap)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(pos) && pos[i] != 0; i++ {
			if err := ch.LoadChunk(pos[i], data[i]); err != nil {
				t.Fatal(err)
			}
		}
		return ch, nil
	}
	cf, err := ParseCuckooHeader(data[0], noCap)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(pos) && pos[i] != 0; i++ {
		if err := cf.LoadChunk(pos[i], data[i]); err != nil {
			t.Fatal(err)
		}
	}
	return nil, cf
}

// checkProbes answers the recorded MEXISTS/COUNT probes, false positives
// included, from the loaded filter.
func checkProbes(t *testing.T, r golden.Recipe, ch *Chain, cf *Cuckoo) {
	for _, p := range r.Probes {
		a := p.Argv()
		var sb strings.Builder
		cmd := strings.ToUpper(string(a[0]))
		if strings.HasSuffix(cmd, "MEXISTS") {
			sb.WriteString("*" + strconv.Itoa(len(a)-2) + "\r\n")
		}
		for _, it := range a[2:] {
			var v uint64
			switch {
			case cmd == "CF.COUNT" && cf != nil:
				v = cf.Count(it)
			case ch != nil && ch.Test(it), cf != nil && cf.Exists(it):
				v = 1
			}
			sb.WriteString(":" + strconv.FormatUint(v, 10) + "\r\n")
		}
		if want := string(p.Want()); sb.String() != want {
			t.Errorf("%s %s: got %q want %q", cmd, a[1], sb.String(), want)
		}
	}
}
