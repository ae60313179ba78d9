package bolt

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// boltReveals reports whether the bolt file at path shows the marker, in
// its bytes or in any value of any bucket.
func boltReveals(t *testing.T, path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := bytes.Contains(raw, []byte(storetest.SecretMarker))
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				found = found || storetest.RevealsSecret(k) || storetest.RevealsSecret(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestSecretMarkerBolt(t *testing.T) {
	keys := storetest.SecretKeys(t)
	for _, leak := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "state.db")
		s := openBoltAt(t, path, osbtest.NewClock(storetest.T0).Now)
		storetest.PutSecrets(t, s, keys, leak)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := boltReveals(t, path); got != leak {
			t.Errorf("with the marker in plain text %t: the bolt file shows it: %t", leak, got)
		}
	}
}
