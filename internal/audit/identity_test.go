package audit

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeIdentityJSON is DecodeIdentity as it was, all through
// encoding/json: the reference it must match.
func decodeIdentityJSON(header string) *Identity {
	platform, value, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || platform == "" || len(platform) > maxPlatformLen || !isToken(platform) {
		return nil
	}
	id := &Identity{Platform: platform}
	value = strings.TrimSpace(value)
	if len(value) > base64.StdEncoding.EncodedLen(maxIdentityJSON) {
		id.Undecodable = true
		return id
	}
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(value)
	}
	var v struct {
		UserID   any `json:"user_id"`
		Username any `json:"username"`
	}
	if err != nil || json.Unmarshal(raw, &v) != nil {
		id.Undecodable = true
		return id
	}
	if s, ok := v.UserID.(string); ok && s != "" {
		id.UserID = capLen(s, maxUserLen)
	} else if s, ok := v.Username.(string); ok {
		id.Username = capLen(s, maxUserLen)
	}
	return id
}

func checkIdentity(t *testing.T, header string) {
	t.Helper()
	if diff := cmp.Diff(decodeIdentityJSON(header), DecodeIdentity(header)); diff != "" {
		t.Fatalf("DecodeIdentity(%q) (-encoding/json +got):\n%s", header, diff)
	}
}

// identityValues are JSON values that exercise the member matching.
var identityValues = []string{
	`{"user_id":"u1"}`, `{"username":"duke"}`, `{"user_id":"u1","username":"duke"}`, `{"user_id":"","username":"duke"}`,
	`{"USER_ID":"u2"}`, `{"User_Id":"u3","user_id":"u4"}`, `{"user_id":"u4","USER_ID":"u5"}`, `{"UserName":"x"}`,
	`{"user_id":"a","user_id":""}`, `{"user_id":42,"username":"n"}`, `{"user_id":1e400}`, `{"other":1e400,"user_id":"u"}`,
	`{"user_id":null,"username":null}`, `{"user_id":["a"],"username":{"a":"b"}}`, `{"user_id":true}`,
	`{"user_\u0069d":"esc"}`, `{"user_id":"a\"b\\c\u00e9"}`, `{"user_id":"\ud83d\ude00"}`, `{"user_id":"\ud800"}`,
	`{"uſername":"long s"}`, `{"user_\u0131d":"dotless"}`, `{"ᴜser_id":"x"}`, `{"user_id":"é ✓ 😀 \u2028"}`,
	"{\"user_id\":\"\xff\xfe\"}", "{\"us\xe9r_id\":\"x\"}", `{"username":"` + strings.Repeat("y", 300) + `"}`,
	`{"user_id":"` + strings.Repeat("é", 200) + `"}`, ` { "user_id" : "spaced" , "username":"s" } `, "\t{\n\"user_id\"\r:\"ws\"}\n",
	`{"nested":{"user_id":"inner"},"username":"outer"}`, `{"a":[{"user_id":"x"},"]}\"",{}],"user_id":"after"}`,
	`{"a":"}","b":"\\","user_id":"q"}`, `{}`, `null`, ` null `, `[]`, `["user_id"]`, `"user_id"`, `42`, `true`, ``, `{`,
	`{"user_id":"u"}x`, `{"user_id":"u",}`, `{"user_id" "u"}`, `{"user_id":'u'}`, "{\"user_id\":\"tab\tin\"}",
	`{"user_id":"u"} {"user_id":"v"}`, `{"a":-0.5e+3,"b":false,"c":null,"user_id":"n"}`, `{"user_id":"` + strings.Repeat("z", 600) + `"}`,
}

func TestDecodeIdentityMatchesEncodingJSON(t *testing.T) {
	for _, v := range identityValues {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			checkIdentity(t, "cloudfoundry "+enc.EncodeToString([]byte(v)))
		}
	}
	for _, h := range []string{"", "cf", "cf ", " cf  e30= ", "cf e30", "cf e3", "cf !!!", "cf e30=\n", "cf e3\n0=", "c/f e30=",
		"cf " + strings.Repeat("A", base64.StdEncoding.EncodedLen(maxIdentityJSON)+1), strings.Repeat("p", 65) + " e30="} {
		checkIdentity(t, h)
	}
}

// Pieces of random identity values: member names, string values (the
// first few plain) and other values.
var (
	randomKeys = []string{"user_id", "username", "USER_ID", "UserName", "user_ID", "other", "user", "", "username ",
		"user_\\u0069d", "uſername"}
	randomStrings = []string{`""`, `"u1"`, `"duke"`, `"}"`, `"é ✓"`, `"` + strings.Repeat("w", 280) + `"`,
		`"é\\u00e9"`, `"a\\"b"`, "\"\xff\"", `"\\\\"`}
	randomOthers = []string{`1`, `-2.5e3`, `1e400`, `true`, `false`, `null`, `[]`, `{}`}
)

// randomJSON is a random JSON value, valid or nearly.
func randomJSON(rng *rand.Rand, depth int) string {
	switch n := rng.IntN(10); {
	case n < 5 || depth > 2:
		if rng.IntN(3) == 0 {
			return randomOthers[rng.IntN(len(randomOthers))]
		}
		if rng.IntN(2) == 0 {
			return randomStrings[rng.IntN(6)]
		}
		return randomStrings[rng.IntN(len(randomStrings))]
	case n < 8:
		return randomObject(rng, depth)
	}
	var sb strings.Builder
	sb.WriteString("[")
	for i := range rng.IntN(3) {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(randomJSON(rng, depth+1))
	}
	sb.WriteString("]")
	return sb.String()
}

// randomObject is a random JSON object, valid or nearly.
func randomObject(rng *rand.Rand, depth int) string {
	var sb strings.Builder
	sb.WriteString([]string{"{", " {", "{\n"}[rng.IntN(3)])
	for i := range rng.IntN(5) {
		if i > 0 {
			sb.WriteString([]string{",", " , ", ",\n"}[rng.IntN(3)])
		}
		key := randomKeys[rng.IntN(len(randomKeys))]
		if rng.IntN(2) == 0 {
			key = randomKeys[rng.IntN(9)]
		}
		sb.WriteString(`"` + key + `":` + randomJSON(rng, depth+1))
	}
	if rng.IntN(30) == 0 {
		sb.WriteString(",") // invalid
	}
	sb.WriteString("}")
	return sb.String()
}

func TestDecodeIdentityMatchesEncodingJSONRandomly(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 5000
	fast := 0
	for range n {
		v := randomJSON(rng, 0)
		if rng.IntN(5) > 0 {
			v = randomObject(rng, 0)
		}
		checkIdentity(t, "cf "+base64.StdEncoding.EncodeToString([]byte(v)))
		if json.Valid([]byte(v)) {
			if _, _, found := userMembers([]byte(v)); found == membersFound {
				fast++
			}
		}
	}
	if fast < n/3 {
		t.Errorf("%d of %d random values decoded without encoding/json; the test hardly checks userMembers", fast, n)
	}
}

func FuzzDecodeIdentity(f *testing.F) {
	for _, v := range identityValues[:12] {
		f.Add(v, true)
	}
	f.Add("cf e30=", false)
	f.Fuzz(func(t *testing.T, s string, asJSON bool) {
		if asJSON {
			checkIdentity(t, "cloudfoundry "+base64.StdEncoding.EncodeToString([]byte(s)))
			checkIdentity(t, "k8s "+base64.RawStdEncoding.EncodeToString([]byte(s)))
		} else {
			checkIdentity(t, s)
		}
	})
}

func BenchmarkDecodeIdentity(b *testing.B) {
	h := "cloudfoundry " + b64(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360","user_name":"alice","email":"a@example.com"}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = DecodeIdentity(h)
	}
}

// TestCachedIdentity: the cache answers as DecodeIdentity does, for the
// header it was asked, including malformed ones and headers that share a
// slot, and a repeated header costs no allocation.
func TestCachedIdentity(t *testing.T) {
	enc := func(js string) string { return "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(js)) }
	headers := []string{"", "cloudfoundry", "cloudfoundry !!!", enc(`{"user_id":"u-1"}`), enc(`{"username":"alice"}`),
		enc(`[1]`), "kubernetes " + base64.StdEncoding.EncodeToString([]byte(`{"username":"bob","uid":"x"}`))}
	for i := range 2 * identityCacheSlots { // more headers than slots: collisions replace entries
		headers = append(headers, enc(fmt.Sprintf(`{"user_id":"user-%d"}`, i)))
	}
	for round := range 2 {
		for _, h := range headers {
			if got, want := CachedIdentity(h), DecodeIdentity(h); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: CachedIdentity(%q) = %+v, want %+v", round, h, got, want)
			}
		}
	}
	h := enc(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360"}`)
	CachedIdentity(h)
	if n := testing.AllocsPerRun(100, func() { CachedIdentity(h) }); n != 0 {
		t.Errorf("a cached header costs %v allocations, want 0", n)
	}
}
