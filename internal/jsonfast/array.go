package jsonfast

// Span is one value of a JSON document, as byte offsets.
type Span struct{ Start, End int }

// ArrayElements lists the elements of the JSON array whose "[" is at
// doc[open], and returns the offset of its closing "]": what json.Unmarshal
// into a []json.RawMessage finds, as offsets into doc. It expects valid
// JSON, as ObjectMembers does; on anything else it stops early and reports
// ok false, but never panics.
func ArrayElements(doc []byte, open int) (elems []Span, closing int, ok bool) {
	if open >= len(doc) || doc[open] != '[' {
		return nil, 0, false
	}
	i := SkipSpace(doc, open+1)
	for i < len(doc) && doc[i] != ']' {
		end := skipValue(doc, i)
		if end <= i {
			return elems, 0, false
		}
		elems = append(elems, Span{Start: i, End: end})
		i = SkipSpace(doc, end)
		if i < len(doc) && doc[i] == ',' {
			i = SkipSpace(doc, i+1)
		}
	}
	if i >= len(doc) {
		return elems, 0, false
	}
	return elems, i, true
}
