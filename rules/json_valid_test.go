package rules

import (
	"github.com/osb-gateway/osb-gateway/internal/raceflag"

	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are documents on both sides of the grammar's edges.
var validJSONCases = []string{
	``, ` `, `{}`, `[]`, ` {} `, `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a":1}`, `{"a" : 1 , "b":[1,2,{"c":null}]}`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `[1 2]`,
	`0`, `-0`, `01`, `-`, `1.`, `.1`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-10`, `1.5.5`, `+1`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `[true,false,null]`, `[truex]`, `True`,
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"a`, `"\`,
	"\"\x01\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\t\n\r {} \t", "\v{}", "{}\x00",
	`{"state":"in progress","description":"provisioning"}`, `[[[[[]]]]]`, `[[[[[]]]]`, `{"a":{"b":{"c":[]}}}`,
	`1 2`, `{} {}`, `"a" "b"`, `[1]]`, `{"a":1}}`,
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range validJSONCases {
		if got, want := validJSON([]byte(doc)), json.Valid([]byte(doc)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", doc, got, want)
		}
	}
	for _, depth := range []int{63, 64, 65, maxJSONDepth, maxJSONDepth + 1} {
		doc := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		if got, want := validJSON(doc), json.Valid(doc); got != want {
			t.Errorf("validJSON of %d nested arrays = %v, encoding/json says %v", depth, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, doc := range validJSONCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := validJSON(doc), json.Valid(doc); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", doc, got, want)
		}
	})
}

func TestValidJSONAllocs(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("the race detector changes allocation counts; run without -race")
	}
	doc := []byte(`{"state":"in progress","description":"provisioning","nested":[{"a":[1,2.5e3,true,null]}]}`)
	if n := testing.AllocsPerRun(100, func() { validJSON(doc) }); n != 0 {
		t.Errorf("validJSON allocates %v times, want 0", n)
	}
}

func BenchmarkValidJSON(b *testing.B) {
	doc := []byte(`{"state":"in progress","description":"provisioning \u00e9","operation":"task-42"}`)
	b.Run("rules", func(b *testing.B) {
		for b.Loop() {
			validJSON(doc)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(doc)
		}
	})
}
