package rules

import (
	"encoding/json"
	"testing"
)

func TestSameJSON(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true},
		{``, `{}`, true},
		{``, ``, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":`, `{"a":`, true}, // the same bytes
		{`{"a":`, `{}`, false},
		{`{"a":1}`, ``, false},
	} {
		if got := SameJSON(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("SameJSON(%s, %s) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestAppGUID(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{AppGUID: "top", BindResource: json.RawMessage(`{"app_guid":"inner"}`)}, "top"},
		{Request{BindResource: json.RawMessage(`{"app_guid":"inner"}`)}, "inner"},
		{Request{BindResource: json.RawMessage(`{"route":"r"}`)}, ""},
		{Request{BindResource: json.RawMessage(`[1]`)}, ""},
		{Request{}, ""},
	} {
		if got := AppGUID(&tc.req); got != tc.want {
			t.Errorf("AppGUID(%+v) = %q, want %q", tc.req, got, tc.want)
		}
	}
}
