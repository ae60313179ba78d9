package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestAdmin(t *testing.T) {
	var ready atomic.Bool
	a := NewAdmin(func() error {
		if !ready.Load() {
			return errors.New("draining")
		}
		return nil
	})
	srv := httptest.NewServer(a)
	defer srv.Close()
	get := func(path string) (int, string) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 503 || body != "{\"reason\":\"draining\",\"status\":\"not ready\"}\n" {
		t.Errorf("/readyz while not ready: %d %s", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 || body != "{\"status\":\"ready\"}\n" {
		t.Errorf("/readyz when ready: %d %s", code, body)
	}
	if code, _ := get("/t1/b1/v2/catalog"); code != 404 {
		t.Errorf("the admin listener serves OSB paths: %d", code)
	}
}
