package syncer

import "strings"

// matcher compares names with DM's wildcard patterns: * matches any run of
// characters, ? matches one character; everything else is literal. When
// caseSensitive is false both sides are compared in lower case.
type matcher struct {
	caseSensitive bool
}

// fold returns s as it is compared.
func (m matcher) fold(s string) string {
	if m.caseSensitive {
		return s
	}
	return strings.ToLower(s)
}

// match reports whether name matches pattern.
func (m matcher) match(pattern, name string) bool {
	return wildcardMatch(m.fold(pattern), m.fold(name))
}

// matchAny reports whether name matches one of patterns.
func (m matcher) matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if m.match(p, name) {
			return true
		}
	}
	return false
}

// wildcardMatch matches p (with * and ?) against s, rune by rune, without
// backtracking blow-up (greedy star with one saved position).
func wildcardMatch(p, s string) bool {
	pr, sr := []rune(p), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(sr) {
		switch {
		case pi < len(pr) && (pr[pi] == '?' || pr[pi] == sr[si]):
			pi++
			si++
		case pi < len(pr) && pr[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(pr) && pr[pi] == '*' {
		pi++
	}
	return pi == len(pr)
}
