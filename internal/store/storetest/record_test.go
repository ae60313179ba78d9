package storetest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestDecodeOldOrphanRecord decodes OldOrphanRecord as OldOrphan, which
// CheckOldOrphanRecord has the backends serve.
func TestDecodeOldOrphanRecord(t *testing.T) {
	got, err := store.DecodeOrphan([]byte(storetest.OldOrphanRecord))
	if d := cmp.Diff(storetest.OldOrphan(), got); err != nil || d != "" {
		t.Errorf("DecodeOrphan = %v; diff (-want +got):\n%s", err, d)
	}
}
