package observe

import (
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestAPIVersionString(t *testing.T) {
	for _, v := range []osb.Version{{Major: 2, Minor: 0}, {Major: 2, Minor: 17}, {Major: 2, Minor: 31}, {Major: 2, Minor: 32},
		{Major: 2, Minor: 1000}, {Major: 3, Minor: 1}, {Major: 1, Minor: 0}} {
		if got, want := apiVersionString(v), v.String(); got != want {
			t.Errorf("apiVersionString(%v) = %q, want %q", v, got, want)
		}
	}
}
