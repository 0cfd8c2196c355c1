package ascii

import "testing"

func TestEqualFold(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"WEIGHTS", "weights", true},
		{"WeIgHtS", "WEIGHTS", true},
		{"expansion", "EXPANSION", true},
		{"@[`{", "@[`{", true},
		// The bytes next to the letters do not fold onto them.
		{"@", "`", false},
		{"[", "{", false},
		{"weights", "weight", false},
		{"weight", "weights", false},
		{"s", "", false},
		// Unicode look-alikes never equal an ASCII letter.
		{"WEIGHTſ", "WEIGHTS", false},
		{"ſ", "s", false},
		{"ſ", "S", false},
		{"\u212A", "k", false},
		{"\u212A", "K", false},
		{"İ", "i", false},
		{"ı", "I", false},
		{"ı", "i", false},
		{"ſ", "ſ", true},
		{"\xff", "\xff", true},
		{"\xff", "\xdf", false},
	} {
		if got := EqualFold(c.a, c.b); got != c.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := EqualFold([]byte(c.a), c.b); got != c.want {
			t.Errorf("EqualFold([]byte(%q), %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	// Every pair of bytes: equal exactly when C's tolower makes them so.
	for x := 0; x < 256; x++ {
		for y := 0; y < 256; y++ {
			want := x == y || (x|0x20 == y|0x20 && x|0x20 >= 'a' && x|0x20 <= 'z')
			if got := EqualFold(string([]byte{byte(x)}), string([]byte{byte(y)})); got != want {
				t.Fatalf("EqualFold(%#x, %#x) = %v", x, y, got)
			}
		}
	}
}

func TestToLowerToUpper(t *testing.T) {
	for _, c := range []struct{ in, lower, upper string }{
		{"", "", ""},
		{"Config|GET", "config|get", "CONFIG|GET"},
		{"already lower", "already lower", "ALREADY LOWER"},
		// Multi-byte runes pass through unchanged, whatever Go's
		// strings.ToLower/ToUpper would make of them.
		{"\u212AILL", "\u212Aill", "\u212AILL"},
		{"LİST", "lİst", "LİST"},
		{"ſet", "ſet", "ſET"},
		{"lıst", "lıst", "LıST"},
		{"\xff\x80Z", "\xff\x80z", "\xff\x80Z"},
	} {
		if got := ToLower(c.in); got != c.lower {
			t.Errorf("ToLower(%q) = %q, want %q", c.in, got, c.lower)
		}
		if got := ToUpper([]byte(c.in)); got != c.upper {
			t.Errorf("ToUpper(%q) = %q, want %q", c.in, got, c.upper)
		}
	}
}

// The argument is the client's: lowering or raising it must copy.
func TestToLowerLeavesArgument(t *testing.T) {
	arg := []byte("Config|GET")
	if got := ToLower(arg); got != "config|get" || string(arg) != "Config|GET" {
		t.Errorf("ToLower gave %q and left the argument %q", got, arg)
	}
	if got := ToUpper(arg); got != "CONFIG|GET" || string(arg) != "Config|GET" {
		t.Errorf("ToUpper gave %q and left the argument %q", got, arg)
	}
}

func TestToLowerNoCopy(t *testing.T) {
	s := "already lower ſ"
	if n := testing.AllocsPerRun(10, func() { _ = ToLower(s) }); n != 0 {
		t.Errorf("ToLower of a lower-case string allocated %v times", n)
	}
}
