// Package jsonfast holds the gateway's standard-library replacements for
// measured hot paths, all of them JSON: validity (Valid, for
// encoding/json.Valid), string writing (AppendString, for json.Encoder with
// HTML escaping off), the members of an object and the elements of an
// array as offsets into its bytes (ObjectMembers and ArrayElements, for
// json.Unmarshal into a map[string]json.RawMessage or a []json.RawMessage;
// Object.LastFold, for its matching of keys to struct fields), string
// tokens (Unquote, for json.Unmarshal into a string) and a token scanner
// (Scanner, for json.Decoder.Token).
//
// Each answers exactly what the encoding/json behaviour it replaces
// answers, on every input it accepts; fuzz_test.go is the one differential
// fuzz suite that holds them to it. Each earns its place by a benchmark
// beside it (bench_test.go): when the benchmark stops showing the gain, the
// replacement goes and its callers use encoding/json.
//
// Nothing here allocates on the paths its callers take per request, and
// every function is safe for concurrent use.
package jsonfast
