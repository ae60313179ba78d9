package osbtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestBroker(t *testing.T) {
	quiet := NewBroker(t, nil)
	teapot := NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // the answer may read the body too
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write(b)
	})
	tests := []struct {
		name     string
		b        *Broker
		wantCode int
		wantBody string
	}{
		{"default answer", quiet, 200, `{"seen":"/v2/catalog?x=1"}`},
		{"own answer", teapot, http.StatusTeapot, `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := http.Post(tc.b.URL+"/v2/catalog?x=1", "application/json", strings.NewReader(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.wantCode || string(got) != tc.wantBody {
				t.Errorf("answer %d %s, want %d %s", res.StatusCode, got, tc.wantCode, tc.wantBody)
			}
			last := tc.b.Last(t)
			body, _ := io.ReadAll(last.Body)
			if last.Method != "POST" || last.URL.RequestURI() != "/v2/catalog?x=1" || string(body) != `{"a":1}` {
				t.Errorf("recorded %s %s %s, want POST /v2/catalog?x=1 {\"a\":1}", last.Method, last.URL.RequestURI(), body)
			}
			if n := len(tc.b.Requests()); n != 1 {
				t.Errorf("%d requests recorded, want 1", n)
			}
		})
	}
}
