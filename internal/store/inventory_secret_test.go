package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// The secret-marker test: parameters and credentials sealed with
// internal/seal and stored never appear, in any form a reader of the
// storage can get without the key, in the bolt file or in Redis.

const marker = "MARKER-7f3a9c-hunter2"

// markerKeys seals the test's secrets.
func markerKeys(t *testing.T) *seal.Keyring {
	k, err := seal.New(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// putSecrets stores an instance and a binding whose parameters and
// credentials hold the marker, sealed, through every write path. With
// leak set, it also puts the marker in plain text in a field that is not
// secret, the control that shows the scan would see it.
func putSecrets(t *testing.T, s Store, keys *seal.Keyring, leak bool) {
	ctx := context.Background()
	sealAs := func(what, secret string) []byte {
		b, err := keys.Seal([]byte(`{"password":"`+secret+`"}`), []byte(what))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in := testInstance("b1", "i1", "cf1")
	in.SealedParameters = sealAs("parameters\x00b1\x00i1", marker)
	bd := testBinding("b1", "i1", "x1")
	bd.SealedParameters = sealAs("parameters\x00b1\x00i1\x00x1", marker)
	bd.SealedCredentials = sealAs("credentials\x00b1\x00i1\x00x1", marker)
	if leak {
		in.LastOperation.Description = "the password is " + marker
	}
	mustPutInstance(t, s, in)
	mustPutBinding(t, s, bd)
	in2, bd2 := in, bd
	in2.InstanceID, bd2.BindingID = "i2", "x2"
	if _, err := s.Import(ctx, []Entry{{Instance: &in2}, {Binding: &bd2}}, true); err != nil {
		t.Fatal(err)
	}
	// With the key, the secret comes back.
	got, err := s.GetBinding(ctx, "b1", "i1", "x1")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := keys.Open(got.SealedCredentials, []byte("credentials\x00b1\x00i1\x00x1"))
	if err != nil || !bytes.Contains(plain, []byte(marker)) {
		t.Fatalf("Open of the stored credentials = %q, %v", plain, err)
	}
}

// revealed reports whether v shows the marker: in its bytes, or in the
// body of an inventory record it holds once inflated (the whole of v, or
// what follows a NUL in it: a Redis member holds its record after its ids).
func revealed(v []byte) bool {
	if bytes.Contains(v, []byte(marker)) {
		return true
	}
	// A record may start anywhere: a Redis member holds an instance's
	// record and its bindings' after ids and lengths.
	found := false
	for i := 0; i < len(v) && !found; i++ {
		Unpack(v[i:], func(_ string, body []byte) error {
			found = bytes.Contains(body, []byte(marker))
			return nil
		})
	}
	return found
}

// boltReveals reports whether the bolt file at path shows the marker, in
// its bytes or in any value of any bucket.
func boltReveals(t *testing.T, path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := bytes.Contains(raw, []byte(marker))
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				found = found || revealed(k) || revealed(v)
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
	keys := markerKeys(t)
	for _, leak := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "state.db")
		s := openBoltAt(t, path, osbtest.NewClock(t0).Now)
		putSecrets(t, s, keys, leak)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := boltReveals(t, path); got != leak {
			t.Errorf("with the marker in plain text %t: the bolt file shows it: %t", leak, got)
		}
	}
}

// redisReveals reports whether any key under prefix, or any value, member
// or field of one, shows the marker.
func redisReveals(t *testing.T, raw *redis.Client, prefix string) bool {
	ctx := context.Background()
	keys, err := raw.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS %s* = %v, %v", prefix, keys, err)
	}
	found := false
	see := func(vs ...string) {
		for _, v := range vs {
			found = found || revealed([]byte(v))
		}
	}
	for _, k := range keys {
		see(k)
		switch typ := raw.Type(ctx, k).Val(); typ {
		case "string":
			see(raw.Get(ctx, k).Val())
		case "hash":
			for f, v := range raw.HGetAll(ctx, k).Val() {
				see(f, v)
			}
		case "zset":
			see(raw.ZRange(ctx, k, 0, -1).Val()...)
		case "set":
			see(raw.SMembers(ctx, k).Val()...)
		default:
			t.Fatalf("key %q has type %q, which the scan does not read", k, typ)
		}
	}
	return found
}

func TestSecretMarkerRedis(t *testing.T) {
	keys := markerKeys(t)
	srv := storetest.StartRedis(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	for _, leak := range []bool{false, true} {
		s := openRedisAt(t, redisConfig(srv), osbtest.NewClock(t0).Now)
		putSecrets(t, s, keys, leak)
		// A lock and an orphan beside the inventory, so the scan covers
		// every kind of key the store writes.
		mustAcquire(t, s, testLock("i1", "owner-1", time.Hour))
		if err := s.PutOrphan(context.Background(), testOrphan("o1", t0)); err != nil {
			t.Fatal(err)
		}
		if got := redisReveals(t, raw, s.prefix); got != leak {
			t.Errorf("with the marker in plain text %t: Redis shows it: %t", leak, got)
		}
	}
}
