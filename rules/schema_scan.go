package rules

import "github.com/osb-gateway/osb-gateway/internal/jsonfast"

// schemaScan is what one pass over a parameter schema's bytes finds: what
// the compile-free lint checks need, gathered without decoding the schema
// into Go values (decoding every schema of a large catalog would cost more
// than the rest of building its index). Where a member repeats, the last one
// counts, as when decoding.
type schemaScan struct {
	schema scanString // the root's "$schema"
	typ    scanString // the root's "type"
	// nodes are the objects that hold an id or a reference keyword, and
	// the objects around them; a parent comes before its children.
	nodes []scanNode
}

// scanString is a member that may hold a string.
type scanString struct {
	set bool // the member is present
	str bool // and its value is a string, val
	val string
}

// scanKind says what an object of the schema document is.
type scanKind uint8

const (
	objSchema scanKind = iota // a schema: members are keywords
	objNames                  // a map from names to schemas, such as "properties"
	objData                   // data, such as "enum": not schemas, never compiled
)

// The id keywords: draft-04's, and that of later drafts.
const (
	idDraft4 = iota
	idDollar
	numIDKeywords
)

// idKeywords are the names of the id keywords.
var idKeywords = [numIDKeywords]string{idDraft4: "id", idDollar: "$id"}

// scanNode is an object of the schema document.
type scanNode struct {
	parent int // index in schemaScan.nodes, or -1 for the root
	kind   scanKind
	refs   [len(refKeywords)]scanString // by refKeywords
	ids    [numIDKeywords]scanString
}

// scanSchema scans a schema that is a JSON object. The scan relies on the
// bytes being valid JSON, as a decoded catalog's are; it fails on most
// malformed input but does not validate.
func scanSchema(b []byte) (*schemaScan, error) {
	s := &scanner{Scanner: jsonfast.NewScanner(b)}
	s.frames = s.stack[:0]
	if s.SkipSpace(); s.Peek() != '{' {
		return nil, jsonfast.ErrSyntax
	}
	if err := s.value(objSchema, 0); err != nil {
		return nil, err
	}
	if s.SkipSpace(); s.Offset() != len(b) {
		return nil, jsonfast.ErrSyntax
	}
	return &s.out, nil
}

// scanner walks a schema document; its jsonfast.Scanner reads the tokens.
type scanner struct {
	jsonfast.Scanner
	out schemaScan
	// frames are the objects open around the position, outermost first,
	// with their node (-1 until one is needed); stack holds the first few.
	frames []scanFrame
	stack  [16]scanFrame
}

// scanFrame is an object open around the scanner's position.
type scanFrame struct {
	kind scanKind
	node int
}

// value scans the value at the position, whose kind is kind.
func (s *scanner) value(kind scanKind, depth int) error {
	switch s.Peek() {
	case '{':
		return s.object(kind, depth)
	case '[':
		return s.array(kind, depth)
	case '"':
		_, err := s.ReadString()
		return err
	case 0:
		return jsonfast.ErrSyntax
	}
	_, err := s.Literal()
	return err
}

// array scans an array whose elements are of kind.
func (s *scanner) array(kind scanKind, depth int) error {
	s.Advance()
	if s.SkipSpace(); s.Peek() == ']' {
		s.Advance()
		return nil
	}
	for {
		s.SkipSpace()
		if err := s.value(kind, depth+1); err != nil {
			return err
		}
		s.SkipSpace()
		switch s.Peek() {
		case ',':
			s.Advance()
		case ']':
			s.Advance()
			return nil
		default:
			return jsonfast.ErrSyntax
		}
	}
}

// object scans an object of kind.
func (s *scanner) object(kind scanKind, depth int) error {
	s.Advance()
	f := len(s.frames)
	s.frames = append(s.frames, scanFrame{kind: kind, node: -1})
	defer func() { s.frames = s.frames[:f] }()
	if s.SkipSpace(); s.Peek() == '}' {
		s.Advance()
		return nil
	}
	for {
		s.SkipSpace()
		key, err := s.ReadString()
		if err != nil {
			return err
		}
		if s.SkipSpace(); s.Peek() != ':' {
			return jsonfast.ErrSyntax
		}
		s.Advance()
		s.SkipSpace()
		if err := s.member(f, key, depth); err != nil {
			return err
		}
		s.SkipSpace()
		switch s.Peek() {
		case ',':
			s.Advance()
		case '}':
			s.Advance()
			return nil
		default:
			return jsonfast.ErrSyntax
		}
	}
}

// member scans the value of member key of the object of frame f, noting
// what the lint checks need.
func (s *scanner) member(f int, key []byte, depth int) error {
	kind := s.frames[f].kind
	var dst *scanString
	switch {
	case depth == 0 && string(key) == "$schema":
		dst = &s.out.schema
	case depth == 0 && string(key) == "type":
		dst = &s.out.typ
	case len(key) > 0 && (key[0] == '$' || key[0] == 'i'): // cheap filter
		if r := keywordIndex(refKeywords[:], key); r >= 0 {
			dst = &s.out.nodes[s.node(f)].refs[r]
		} else if r := keywordIndex(idKeywords[:], key); r >= 0 {
			dst = &s.out.nodes[s.node(f)].ids[r]
		}
	}
	if dst == nil {
		return s.value(childKind(kind, key), depth+1)
	}
	// dst may point into s.out.nodes: set it before scanning on.
	if s.Peek() != '"' {
		*dst = scanString{set: true}
		return s.value(childKind(kind, key), depth+1)
	}
	v, err := s.ReadString()
	*dst = scanString{set: true, str: true, val: string(v)}
	return err
}

// keywordIndex returns the index of key in keywords, or -1.
func keywordIndex(keywords []string, key []byte) int {
	for i, kw := range keywords {
		if kw == string(key) {
			return i
		}
	}
	return -1
}

// childKind is the kind of the value of member key of an object of kind.
func childKind(kind scanKind, key []byte) scanKind {
	switch kind {
	case objNames:
		return objSchema
	case objData:
		return objData
	}
	switch string(key) {
	case "properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies":
		return objNames
	case "enum", "const", "default", "examples", // data
		"$ref", "$recursiveRef", "$dynamicRef", "id", "$id": // strings, whatever else they hold
		return objData
	}
	return objSchema
}

// node returns the node of frame f, adding it and those of the frames
// around it as needed.
func (s *scanner) node(f int) int {
	if n := s.frames[f].node; n >= 0 {
		return n
	}
	parent := -1
	if f > 0 {
		parent = s.node(f - 1)
	}
	s.out.nodes = append(s.out.nodes, scanNode{parent: parent, kind: s.frames[f].kind})
	s.frames[f].node = len(s.out.nodes) - 1
	return s.frames[f].node
}
