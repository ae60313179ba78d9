package jsonfast

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Each benchmark runs a replacement ("jsonfast") beside the encoding/json
// behaviour it replaces ("encoding_json") on what the gateway feeds it;
// the ratio between the two is the gain each doc comment cites.

// answer is a last_operation answer, the most frequent body the gateway
// checks.
var answer = []byte(`{"state":"in progress","description":"provisioning \u00e9","operation":"task-42"}`)

func BenchmarkValid(b *testing.B) {
	b.Run("jsonfast", func(b *testing.B) {
		for b.Loop() {
			Valid(answer)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(answer)
		}
	})
}

func BenchmarkObjectMembers(b *testing.B) {
	b.Run("jsonfast", func(b *testing.B) {
		for b.Loop() {
			var buf [16]Member
			ms, _, _ := AppendObjectMembers(buf[:0], answer, 0)
			ms.Get(answer, "state")
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(answer, &m)
			_ = m["state"]
		}
	})
}

func BenchmarkUnquote(b *testing.B) {
	tok := []byte(`"in progress"`)
	b.Run("jsonfast", func(b *testing.B) {
		for b.Loop() {
			_ = Unquote(tok)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			var s string
			_ = json.Unmarshal(tok, &s)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	s := "683ea748-3092-4ff4-b656-39cacc4d5360 \"provision\"\n"
	buf := make([]byte, 0, 128)
	b.Run("jsonfast", func(b *testing.B) {
		for b.Loop() {
			buf = AppendString(buf[:0], s)
		}
	})
	var w bytes.Buffer
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			w.Reset()
			_ = enc.Encode(s)
		}
	})
}

// schema is a plan's parameter schema, which the catalog index scans for
// the few keywords its lint checks need.
var schema = []byte(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{` +
	`"size":{"type":"integer","minimum":1,"maximum":64,"default":4},"region":{"type":"string","enum":["eu","us","ap"]},` +
	`"tags":{"type":"array","items":{"type":"string","maxLength":63}},"backup":{"$ref":"#/definitions/backup"}},` +
	`"definitions":{"backup":{"type":"object","properties":{"enabled":{"type":"boolean"},"retention_days":{"type":"integer"}}}}}`)

func BenchmarkScanner(b *testing.B) {
	b.Run("jsonfast", func(b *testing.B) {
		for b.Loop() {
			s := NewScanner(schema)
			skipTokens(&s)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(schema))
			for {
				if _, err := dec.Token(); err != nil {
					break
				}
			}
		}
	})
}

// skipTokens reads every token of the document as a walker does.
func skipTokens(s *Scanner) {
	for {
		s.SkipSpace()
		switch s.Peek() {
		case 0:
			return
		case '{', '[', '}', ']', ',', ':':
			s.Advance()
		case '"':
			_, _ = s.ReadString()
		default:
			_, _ = s.Literal()
		}
	}
}
