package audit

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestDecodeIdentity(t *testing.T) {
	tests := []struct {
		name, header string
		want         *Identity
	}{
		{"cloud foundry", "cloudfoundry " + b64(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360"}`),
			&Identity{Platform: "cloudfoundry", UserID: "683ea748-3092-4ff4-b656-39cacc4d5360"}},
		{"kubernetes keeps the username only", "kubernetes " + b64(`{"username":"duke","uid":"c2dde242","groups":["admin","dev"],"extra":{"token":["secret"]}}`),
			&Identity{Platform: "kubernetes", Username: "duke"}},
		{"user_id wins over username", "cloudfoundry " + b64(`{"user_id":"u1","username":"alice"}`),
			&Identity{Platform: "cloudfoundry", UserID: "u1"}},
		{"unpadded base64", "cloudfoundry " + base64.RawStdEncoding.EncodeToString([]byte(`{"user_id":"u2"}`)),
			&Identity{Platform: "cloudfoundry", UserID: "u2"}},
		{"no user fields", "cloudfoundry " + b64(`{"email":"a@example.com"}`), &Identity{Platform: "cloudfoundry"}},
		{"not base64", "cloudfoundry !!!", &Identity{Platform: "cloudfoundry", Undecodable: true}},
		{"not JSON", "cloudfoundry " + b64("password=x"), &Identity{Platform: "cloudfoundry", Undecodable: true}},
		{"user_id not a string", "cloudfoundry " + b64(`{"user_id":42}`), &Identity{Platform: "cloudfoundry"}},
		{"no value", "cloudfoundry", nil},
		{"empty", "", nil},
		{"platform with odd characters", "cloud/foundry " + b64(`{}`), nil},
		{"long user cut", "cf " + b64(`{"user_id":"`+strings.Repeat("x", 300)+`"}`),
			&Identity{Platform: "cf", UserID: strings.Repeat("x", maxUserLen)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecodeIdentity(tc.header)); diff != "" {
				t.Errorf("DecodeIdentity(%q) (-want +got):\n%s", tc.header, diff)
			}
		})
	}
}

func TestParameterKeys(t *testing.T) {
	tests := []struct {
		name, params string
		want         []string
	}{
		{"sorted keys, never values", `{"password":"p4ss","size":"small","nested":{"token":"t"}}`, []string{"nested", "password", "size"}},
		{"absent", ``, nil},
		{"null", `null`, nil},
		{"empty object", `{}`, nil},
		{"not an object", `["password"]`, nil},
		{"malformed", `{"a":`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ParameterKeys(json.RawMessage(tc.params))); diff != "" {
				t.Errorf("ParameterKeys(%s) (-want +got):\n%s", tc.params, diff)
			}
		})
	}
	if got := BodyParameterKeys([]byte(`{"plan_id":"p","parameters":{"b":1,"a":2}}`)); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("BodyParameterKeys = %q", got)
	}
	many := map[string]int{}
	for i := range 100 {
		many[fmt.Sprintf("%03d", i)+strings.Repeat("k", 200)] = i
	}
	raw, _ := json.Marshal(many)
	if got := ParameterKeys(raw); len(got) != maxParamKeys || len(got[0]) != maxParamKeyLen {
		t.Errorf("100 long keys: kept %d, first %d bytes; want %d keys of %d bytes", len(got), len(got[0]), maxParamKeys, maxParamKeyLen)
	}
}
