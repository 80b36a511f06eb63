package sharedstrings

import "unique"

// Unique returns the one copy of s that unique.Make keeps, collected once nothing holds it: for strings
// that repeat from object to object but may also be of one object alone (a label value another controller
// sets), which Share's table, bounded and never giving a string back, must not take. A named string type
// keeps its type.
func Unique[S ~string](s S) S {
	if s == "" {
		return s
	}

	return S(unique.Make(string(s)).Value())
}
