package upstream

import (
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestSameBesidesRetired: a reload that changes retired alone keeps the
// broker's cached catalog; any other change drops it.
func TestSameBesidesRetired(t *testing.T) {
	u := &Upstream{Cfg: config.Broker{Name: "b", URL: "http://x"}}
	if !u.SameBesidesRetired(&config.Broker{Name: "b", URL: "http://x", Retired: config.Retired{On: true, Answer: config.RetiredGone}}) {
		t.Error("retired alone changed: want the same")
	}
	if u.SameBesidesRetired(&config.Broker{Name: "b", URL: "http://y", Retired: config.Retired{On: true}}) {
		t.Error("the URL changed too: want different")
	}
}
