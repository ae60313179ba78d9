package samplebroker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSetCatalog: the catalog on the wire follows SetCatalog and
// ResetCatalog, ETag included; a body that is no JSON object is refused.
func TestSetCatalog(t *testing.T) {
	b := New(Options{})
	s := httptest.NewServer(b)
	defer s.Close()
	get := func() (string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.URL+"/v2/catalog", nil)
		req.Header.Set("X-Broker-API-Version", "2.17")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body), res.Header.Get("Etag")
	}
	fixed, fixedTag := get()
	if err := b.SetCatalog([]byte(`{"services":[]}`)); err != nil {
		t.Fatal(err)
	}
	if body, tag := get(); body != `{"services":[]}` || tag == fixedTag || tag == "" {
		t.Errorf("after SetCatalog: %q, ETag %q (before %q)", body, tag, fixedTag)
	}
	if err := b.SetCatalog([]byte(`[]`)); err == nil {
		t.Error("SetCatalog took an array")
	}
	b.ResetCatalog()
	if body, tag := get(); body != fixed || tag != fixedTag {
		t.Errorf("after ResetCatalog: %q, ETag %q; want the fixed catalog", body, tag)
	}
}
