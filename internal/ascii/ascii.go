// Package ascii is C's case rules in the "C" locale, as Redis and
// RedisBloom apply them to keywords, command and subcommand names, config
// names and type names (strcasecmp, tolower, toupper): only the 26 ASCII
// letters fold. Go's strings.EqualFold, ToLower and ToUpper fold Unicode
// instead ("ſ" matches "s", the Kelvin sign "K" matches "k", "İ" lowers to
// "i"), so they would take a keyword Redis refuses; everything a client
// names is compared here.
package ascii

// Lower is C's tolower: 'A'..'Z' become 'a'..'z', every other byte stays.
func Lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// Upper is C's toupper: 'a'..'z' become 'A'..'Z', every other byte stays.
func Upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		c -= 'a' - 'A'
	}
	return c
}

// EqualFold is strcasecmp(a, b) == 0: same length, and byte for byte equal
// once ASCII letters are lowered. a may be a client's argument as it came.
func EqualFold[T ~string | ~[]byte](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if Lower(a[i]) != Lower(b[i]) {
			return false
		}
	}
	return true
}

// ToLower lowers the ASCII letters of s and leaves every other byte as
// it is (no UTF-8 decoding): the key Redis looks a lowered name up by.
func ToLower[T ~string | ~[]byte](s T) string {
	return mapBytes(s, Lower, 'A', 'Z')
}

// ToUpper raises the ASCII letters of s and leaves every other byte.
func ToUpper[T ~string | ~[]byte](s T) string {
	return mapBytes(s, Upper, 'a', 'z')
}

// mapBytes is s with f applied to every byte, in a copy (s itself, a
// client's argument, is never changed) made only if a byte in [lo, hi],
// the ones f changes, is present.
func mapBytes[T ~string | ~[]byte](s T, f func(byte) byte, lo, hi byte) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= lo && c <= hi {
			b := make([]byte, len(s))
			copy(b, s)
			for j := i; j < len(b); j++ {
				b[j] = f(b[j])
			}
			return string(b)
		}
	}
	return string(s)
}
