// Package golden loads the replies captured from a live RedisBloom
// (testdata/golden) and speaks just enough RESP to replay them byte for byte.
package golden

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// Record is one command and the reply Redis gave.
type Record struct {
	Args      []string `json:"args"`
	ArgsB64   []string `json:"args_b64"`
	Reply     *string  `json:"reply"`
	ReplyB64  *string  `json:"reply_b64"`
	Volatile  bool     `json:"volatile"`
	Unordered bool     `json:"unordered"`
	SleepMS   int64    `json:"sleep_ms"`
	Section   string   `json:"section"`
	Seed      *int64   `json:"seed"`

	// Fields of testdata/oracle (see its README.md).
	Proto                int               `json:"proto"`
	Conn                 string            `json:"conn"`
	Closed               bool              `json:"closed"`
	NoReply              bool              `json:"noreply"`
	Recv                 bool              `json:"recv"`
	Subset               bool              `json:"subset"`
	SubcommandsUnordered bool              `json:"subcommands_unordered"`
	Subst                map[string]string `json:"subst"`
	Note                 string            `json:"note"`
	// Recipe and Type (memusage.jsonl): the dumps.jsonl recipe whose key
	// the record measures, and its filter type.
	Recipe string `json:"recipe"`
	Type   string `json:"type"`
	// Lossy (crafted.jsonl): RedisBloom's filter under this record's key
	// missed adds it acknowledged, and bfserver's differs on purpose (see
	// engine.CuckooTable.Regular): adds are compared, an MEXISTS must find
	// every item, other replies about the key are not compared.
	Lossy bool `json:"lossy"`
}

// Argv decodes the command's arguments.
func (r *Record) Argv() [][]byte {
	var out [][]byte
	for _, a := range r.Args {
		out = append(out, []byte(a))
	}
	for _, a := range r.ArgsB64 {
		b, _ := base64.StdEncoding.DecodeString(a)
		out = append(out, b)
	}
	return out
}

// Want is the recorded reply bytes.
func (r *Record) Want() []byte {
	if r.Reply != nil {
		return []byte(*r.Reply)
	}
	if r.ReplyB64 != nil {
		b, _ := base64.StdEncoding.DecodeString(*r.ReplyB64)
		return b
	}
	return nil
}

// IsCommand reports whether the record carries a command (not a meta line).
func (r *Record) IsCommand() bool { return r.Args != nil || r.ArgsB64 != nil }

// Dir is the golden folder inside the repository's testdata.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "golden")
}

// OracleDir is testdata/oracle: captures of core and admin commands.
func OracleDir() string { return filepath.Join(Dir(), "..", "oracle") }

// Load reads one .jsonl file of records from Dir.
func Load(name string) ([]Record, error) { return LoadFile(filepath.Join(Dir(), name)) }

// LoadOracle reads one .jsonl file of records from OracleDir.
func LoadOracle(name string) ([]Record, error) { return LoadFile(filepath.Join(OracleDir(), name)) }

// LoadFile reads a .jsonl file of records.
func LoadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var out []Record
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Recipe is one line of dumps.jsonl.
type Recipe struct {
	Name     string          `json:"name"`
	Type     string          `json:"type"`
	Key      string          `json:"key"`
	Recipe   []Record        `json:"recipe"`
	Scandump [][2]any        `json:"scandump"`
	Info     json.RawMessage `json:"info"`
	Debug    json.RawMessage `json:"debug"`
	Card     *int64          `json:"card"`
	Probes   []Record        `json:"probes"`
}

// LoadRecipes reads dumps.jsonl.
func LoadRecipes() ([]Recipe, error) {
	f, err := os.Open(filepath.Join(Dir(), "dumps.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var out []Recipe
	for sc.Scan() {
		var r Recipe
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Encode renders a command as a RESP multibulk.
func Encode(args [][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n", len(a))
		b.Write(a)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// ReadFrame reads one complete RESP2/RESP3 reply and returns its raw bytes.
func ReadFrame(r *bufio.Reader) ([]byte, error) {
	var out bytes.Buffer
	err := readFrame(r, &out)
	return out.Bytes(), err
}

func readFrame(r *bufio.Reader, out *bytes.Buffer) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return err
	}
	out.Write(line)
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return errors.New("malformed line " + strconv.Quote(string(line)))
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		_, err = io.CopyN(out, r, int64(n)+2)
		return err
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readFrame(r, out); err != nil {
				return err
			}
		}
		return nil
	}
	return errors.New("unknown frame type " + strconv.Quote(string(line)))
}
