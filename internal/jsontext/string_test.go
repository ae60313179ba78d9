package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodingJSON is s as json.Encoder writes it with HTML escaping off.
func encodingJSON(t *testing.T, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

var samples = []string{"", "plain", "id-\"quoted\"\n\x01\xff", "é\u2028<&>\u2029", "\\\t\r\x7f\b\f", "\xed\xa0\x80", "\x00\x1f", "日本\xe6\x97"}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func TestAppendStringAppends(t *testing.T) {
	got := AppendString([]byte(`{"k":`), "v\n")
	if want := `{"k":"v\n"`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = AppendString(make([]byte, 0, 64)[:0], "a\"b\xffc") }); n > 1 {
		t.Errorf("AppendString into a large enough buffer allocates %v times, want at most the buffer's 1", n)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}
