// Package glob is Redis's glob matching, for KEYS, SCAN MATCH, ACL key patterns and
// CONFIG GET.
package glob

// Match is Redis's glob matching (stringmatchlen): * ? [abc] [^a-z] and \x.
// It runs in O(len(pattern)×len(s)) at worst, since every * is tried at each
// position without recursion blow-up thanks to the backtracking point.
func Match(pattern, s []byte) bool {
	var starP, starS = -1, 0
	p, i := 0, 0
	for i < len(s) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				for p < len(pattern) && pattern[p] == '*' {
					p++
				}
				if p == len(pattern) {
					return true
				}
				starP, starS = p, i
				continue
			case '?':
				p++
				i++
				continue
			case '[':
				if np, ok := matchClass(pattern, p, s[i]); ok {
					p = np
					i++
					continue
				}
			case '\\':
				if p+1 < len(pattern) {
					if pattern[p+1] == s[i] {
						p += 2
						i++
						continue
					}
					break
				}
				fallthrough
			default:
				if pattern[p] == s[i] {
					p++
					i++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		p, i = starP, starS
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchClass matches c against the class starting at pattern[p] == '['. It
// returns the index after the class.
func matchClass(pattern []byte, p int, c byte) (int, bool) {
	p++
	not := p < len(pattern) && pattern[p] == '^'
	if not {
		p++
	}
	match := false
	for p < len(pattern) {
		if pattern[p] == '\\' && p+1 < len(pattern) {
			p++
			if pattern[p] == c {
				match = true
			}
		} else if pattern[p] == ']' {
			break
		} else if p+2 < len(pattern) && pattern[p+1] == '-' {
			lo, hi := pattern[p], pattern[p+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if c >= lo && c <= hi {
				match = true
			}
			p += 2
		} else if pattern[p] == c {
			match = true
		}
		p++
	}
	if p >= len(pattern) { // unterminated class: Redis treats the end as ']'
		p = len(pattern) - 1
	}
	if not {
		match = !match
	}
	return p + 1, match
}
