package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWarningsNameWeakPasswords: a one-character plain-text password was
// accepted silently; now it draws a warning naming where it is, never what
// it is. Long and bcrypt passwords draw none.
func TestWarningsNameWeakPasswords(t *testing.T) {
	c := &Config{Tenants: []Tenant{{Name: "t", Credentials: []Credential{
		{Username: "a", Password: "x"},
		{Username: "b", Password: "a-long-enough-secret"},
		{Username: "c", Password: "$2a$10$REk4.C.hQcDRQYKRuDFD6ehzTKK7LQ.Ivsd.EFCtrm/Pfd9nai1EG"},
	}}}}
	got := Warnings(c)
	want := []string{"tenants[0].credentials[0].password: a plain-text password shorter than 12 characters (it has 1) is easy to guess; use 12 or more (or a bcrypt hash: osb-gateway hash-password)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	for _, w := range got {
		if strings.Contains(w, `"x"`) {
			t.Errorf("a warning shows the password: %s", w)
		}
	}
}
