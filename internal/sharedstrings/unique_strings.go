package sharedstrings

import "unique"

// objects is the table Unique hands out from first: one of its own, so that the strings of decoded objects,
// some of which are of one object alone (a label value another controller sets), never take the room of the
// facts' and decisions' strings in Share's.
var objects = &table{strings: map[string]string{}}

// Unique returns one copy of s for strings that repeat from object to object but may also be of one object
// alone: the copy its own table holds for good while that table has room, else unique.Make's. unique.Make's
// copy is one only while a handle of it lives (a collection lets it go once no handle does, even while
// strings taken from it live on), so it shares the strings of objects decoded close together, the table
// those of every object. A named string type keeps its type.
func Unique[S ~string](s S) S {
	if s == "" {
		return s
	}

	if held, ok := objects.take(string(s)); ok {
		return S(held)
	}

	return S(unique.Make(string(s)).Value())
}
