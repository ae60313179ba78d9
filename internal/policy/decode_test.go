package policy

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzDecodeObject holds decodeObject to encoding/json: every JSON object
// decodes to the values json.Unmarshal gives (numbers compared as
// float64), and nothing panics on anything else.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2.5,"x",null,true,{"c":{}}],"a":2}`, `{"s":"\u00e9\n\ud800"}`,
		` {"n":-0.0,"e":1e3,"big":9007199254740993,"huge":1e400} `, `{"a":}`, `[1]`, `{"a":1} x`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got := decodeObject(doc)
		var want map[string]any
		if !json.Valid(doc) || json.Unmarshal(doc, &want) != nil || want == nil {
			return // not an object: decodeObject may say nil or anything, but must not panic
		}
		if got == nil {
			t.Fatalf("decodeObject(%q) = nil, want %v", doc, want)
		}
		nv, err := mapVal(got).ConvertToNative(reflect.TypeFor[*structpb.Value]())
		if err != nil {
			t.Fatalf("decodeObject(%q): %v", doc, err)
		}
		if g := nv.(*structpb.Value).AsInterface(); !reflect.DeepEqual(g, any(want)) {
			t.Fatalf("decodeObject(%q) = %v, want %v", doc, g, want)
		}
	})
}
