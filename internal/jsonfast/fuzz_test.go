package jsonfast

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seeds are documents on both sides of the grammar's edges, strings that
// need escaping, and objects as OSB requests and answers hold them.
var seeds = []string{
	// Grammar edges.
	``, ` `, `{}`, `[]`, ` {} `, `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a":1}`, `{"a" : 1 , "b":[1,2,{"c":null}]}`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `[1 2]`,
	`0`, `-0`, `01`, `-`, `1.`, `.1`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-10`, `1.5.5`, `+1`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `[true,false,null]`, `[truex]`, `True`,
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"a`, `"\`,
	"\"\x01\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\t\n\r {} \t", "\v{}", "{}\x00",
	`[[[[[]]]]]`, `[[[[[]]]]`, `{"a":{"b":{"c":[]}}}`, `1 2`, `{} {}`, `"a" "b"`, `[1]]`, `{"a":1}}`,
	// Strings to write.
	"plain", "id-\"quoted\"\n\x01\xff", "é\u2028<&>\u2029", "\\\t\r\x7f\b\f", "\xed\xa0\x80", "\x00\x1f", "日本\xe6\x97",
	// Objects: members, duplicates, escaped keys.
	`{"state":"in progress","description":"provisioning","nested":[{"a":[1,2.5e3,true,null]}]}`,
	`{"service_id":"s","plan_id":"p","plan_id":"q","pl\u0061n_id":"r"}`,
	`{"a":1,"b":2,"a":3,"b":4,"a":5}`, `{"\ud83d\ude00":"\u00e9","k\"ey":"v\\"}`, "{\"\xff\":1,\"\xfe\":2}",
	` { "context" : { "platform" : "cloudfoundry" } , "parameters" : { } } `,
	`{"State":"a","state":"b","STATE":"c","sTaTe":null}`, `{"\u212a":1,"k":2,"K":3}`, `{"ſtate":"long s","plans":[]}`,
	`[1, "a" , {"b":[]} ,null]`, ` [ ] `, `{"services":[{"plans":[{"id":"p"}]}]}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"$ref":{"$ref":"#/x"}}}`,
}

// deep is a document nested depth levels, around the nesting limits.
func deep(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// FuzzEncodingJSON is the differential suite: on every input, each
// function of the package answers what the encoding/json behaviour it
// replaces answers.
func FuzzEncodingJSON(f *testing.F) {
	for _, doc := range seeds {
		f.Add([]byte(doc))
	}
	for _, depth := range []int{63, 64, 65, maxDepth, maxDepth + 1} {
		f.Add([]byte(deep(depth)))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := Valid(doc), json.Valid(doc); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
		}
		if got, want := AppendString(nil, string(doc)), encodeString(t, string(doc)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", doc, got, want)
		}
		start := SkipSpace(doc, 0)
		if !json.Valid(doc) {
			// No answer to compare: the functions that expect valid JSON
			// must still not panic.
			_, _ = scanTokens(doc)
			_ = Unquote(doc[start:])
			ms, _, _ := ObjectMembers(doc, start)
			_, _ = ms.Get(doc, "a")
			_, _ = ms.LastFold(doc, "a")
			_, _, _ = ArrayElements(doc, start)
			_, _ = ms.DuplicateKeys(doc), ms.Map(doc)
			return
		}
		got, err := scanTokens(doc)
		if err != nil {
			t.Fatalf("Scanner on %q: %v", doc, err)
		}
		if want := decoderTokens(t, doc); !cmp.Equal(got, want) {
			t.Fatalf("Scanner on %q differs from json.Decoder.Token (-want +got):\n%s", doc, cmp.Diff(want, got))
		}
		switch doc[start] {
		case '"':
			var want string
			if err := json.Unmarshal(doc, &want); err != nil {
				t.Fatal(err)
			}
			if got := Unquote(bytes.TrimSpace(doc)); got != want {
				t.Fatalf("Unquote(%q) = %q, encoding/json decodes %q", doc, got, want)
			}
		case '{':
			agreeOnObject(t, doc, start)
		case '[':
			agreeOnArray(t, doc, start)
		}
	})
}

// encodeString is s as json.Encoder writes it with HTML escaping off.
func encodeString(t *testing.T, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// agreeOnObject checks ObjectMembers and the Object's methods on the valid
// object at doc[open] against json.Unmarshal and json.Decoder.
func agreeOnObject(t *testing.T, doc []byte, open int) {
	t.Helper()
	ms, closing, ok := ObjectMembers(doc, open)
	if !ok || doc[closing] != '}' || SkipSpace(doc, closing+1) != len(doc) {
		t.Fatalf("ObjectMembers(%q) = ok %v, closing %d", doc, ok, closing)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(doc, &want); err != nil {
		t.Fatal(err)
	}
	if got := ms.Map(doc); !cmp.Equal(got, want) {
		t.Fatalf("Map of %q differs from json.Unmarshal (-want +got):\n%s", doc, cmp.Diff(want, got))
	}
	for k, v := range want {
		if got, ok := ms.Get(doc, k); !ok || !bytes.Equal(got, v) {
			t.Fatalf("Get(%q) of %q = %s, %v; json.Unmarshal has %s", k, doc, got, ok, v)
		}
	}
	if _, ok := want["\x00absent"]; !ok {
		if got, ok := ms.Get(doc, "\x00absent"); ok {
			t.Fatalf("Get of an absent key of %q = %s", doc, got)
		}
	}
	keys := decoderKeys(t, doc)
	var gotKeys []string
	for _, m := range ms {
		k := m.Key(doc)
		gotKeys = append(gotKeys, k)
		if !m.Is(doc, k) || m.Is(doc, k+"x") {
			t.Fatalf("Member.Is(%q) of %q disagrees with Member.Key", k, doc)
		}
	}
	if !cmp.Equal(gotKeys, keys) {
		t.Fatalf("keys of %q differ from json.Decoder's (-want +got):\n%s", doc, cmp.Diff(keys, gotKeys))
	}
	if got, want := ms.DuplicateKeys(doc), duplicates(keys); !cmp.Equal(got, want) {
		t.Fatalf("DuplicateKeys of %q (-want +got):\n%s", doc, cmp.Diff(want, got))
	}
	names := []string{"state", "k", "plans"}
	for _, k := range keys {
		names = append(names, strings.ToLower(k))
	}
	for _, name := range names {
		if !isTagName(name) {
			continue
		}
		want := fieldValue(t, doc, name)
		m, ok := ms.LastFold(doc, name)
		if got := m.Value(doc); ok != (want != nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("LastFold(%q) of %q = %s, %v; encoding/json fills a field tagged %q with %s", name, doc, got, ok, name, want)
		}
	}
}

// isTagName reports whether name is lower-case ASCII that encoding/json
// takes as a field's name in a tag.
func isTagName(name string) bool {
	if name == "" || name == "-" {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// fieldValue is what json.Unmarshal of doc puts into a struct field tagged
// name, of type json.RawMessage: nil when no key matches.
func fieldValue(t *testing.T, doc []byte, name string) json.RawMessage {
	t.Helper()
	typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + name + `"`)}})
	v := reflect.New(typ)
	if err := json.Unmarshal(doc, v.Interface()); err != nil {
		t.Fatal(err)
	}
	return v.Elem().Field(0).Interface().(json.RawMessage)
}

// agreeOnArray checks ArrayElements on the valid array at doc[open]
// against json.Unmarshal.
func agreeOnArray(t *testing.T, doc []byte, open int) {
	t.Helper()
	elems, closing, ok := ArrayElements(doc, open)
	if !ok || doc[closing] != ']' || SkipSpace(doc, closing+1) != len(doc) {
		t.Fatalf("ArrayElements(%q) = ok %v, closing %d", doc, ok, closing)
	}
	var want []json.RawMessage
	if err := json.Unmarshal(doc, &want); err != nil {
		t.Fatal(err)
	}
	got := make([]json.RawMessage, len(elems))
	for i, el := range elems {
		got[i] = doc[el.Start:el.End]
	}
	if len(got) != len(want) || len(got) > 0 && !cmp.Equal(got, want) {
		t.Fatalf("ArrayElements of %q differ from json.Unmarshal (-want +got):\n%s", doc, cmp.Diff(want, got))
	}
}

// decoderKeys returns the keys of the top-level object of doc in order,
// as json.Decoder reads them.
func decoderKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// duplicates returns the keys that occur more than once, each once, in
// order of their second occurrence.
func duplicates(keys []string) []string {
	var dups []string
	seen := map[string]int{}
	for _, k := range keys {
		if seen[k]++; seen[k] == 2 {
			dups = append(dups, k)
		}
	}
	return dups
}

// decoderTokens is doc as json.Decoder.Token reads it, numbers as written.
func decoderTokens(t *testing.T, doc []byte) []json.Token {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var toks []json.Token
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return toks
		}
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
}

// scanTokens walks doc with a Scanner the way a caller does, and returns
// the tokens it read in the form json.Decoder.Token returns them.
func scanTokens(doc []byte) ([]json.Token, error) {
	s := NewScanner(doc)
	var toks []json.Token
	s.SkipSpace()
	if err := scanValue(&s, &toks); err != nil {
		return toks, err
	}
	if s.SkipSpace(); s.Offset() != len(doc) {
		return toks, ErrSyntax
	}
	return toks, nil
}

func scanValue(s *Scanner, toks *[]json.Token) error {
	switch c := s.Peek(); c {
	case '{', '[':
		return scanContainer(s, toks, c)
	case '"':
		v, err := s.ReadString()
		*toks = append(*toks, string(v))
		return err
	case 0:
		return ErrSyntax
	}
	lit, err := s.Literal()
	switch string(lit) {
	case "true", "false":
		*toks = append(*toks, string(lit) == "true")
	case "null":
		*toks = append(*toks, nil)
	default:
		*toks = append(*toks, json.Number(lit))
	}
	return err
}

// scanContainer scans the object or array whose opening delimiter is open.
func scanContainer(s *Scanner, toks *[]json.Token, open byte) error {
	s.Advance()
	*toks = append(*toks, json.Delim(open))
	closing := open + 2 // '}' is '{'+2, ']' is '['+2
	if s.SkipSpace(); s.Peek() == closing {
		s.Advance()
		*toks = append(*toks, json.Delim(closing))
		return nil
	}
	for {
		s.SkipSpace()
		if open == '{' {
			k, err := s.ReadString()
			if err != nil {
				return err
			}
			*toks = append(*toks, string(k))
			if s.SkipSpace(); s.Peek() != ':' {
				return ErrSyntax
			}
			s.Advance()
			s.SkipSpace()
		}
		if err := scanValue(s, toks); err != nil {
			return err
		}
		s.SkipSpace()
		switch s.Peek() {
		case ',':
			s.Advance()
		case closing:
			s.Advance()
			*toks = append(*toks, json.Delim(closing))
			return nil
		default:
			return ErrSyntax
		}
	}
}

// The seeds alone are a table test (go test runs them); these pin what a
// seed cannot say.

func TestAppendStringAppends(t *testing.T) {
	got := AppendString([]byte(`{"k":`), "v\n")
	if want := `{"k":"v\n"`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
