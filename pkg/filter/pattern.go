package filter

import "strings"

// Matcher compares names with DM's wildcard patterns: * matches any run of
// characters, ? matches one character; everything else is literal. When
// CaseSensitive is false both sides are compared in lower case.
type Matcher struct {
	CaseSensitive bool
}

// fold returns s as it is compared.
func (m Matcher) fold(s string) string {
	if m.CaseSensitive {
		return s
	}
	return strings.ToLower(s)
}

// Match reports whether name matches pattern.
func (m Matcher) Match(pattern, name string) bool {
	return wildcardMatch(m.fold(pattern), m.fold(name))
}

// MatchAny reports whether name matches one of patterns.
func (m Matcher) MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if m.Match(p, name) {
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
