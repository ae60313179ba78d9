package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The secret-marker test: parameters and credentials sealed with
// internal/seal and stored never appear, in any form a reader of the
// storage can get without the key, in the bolt file or in Redis; nor
// does the id of a console session (its cookie).

// SecretMarker is the secret PutSecrets stores sealed: no reader of the
// storage may find it.
const SecretMarker = "MARKER-7f3a9c-hunter2"

// SecretKeys seals the test's secrets.
func SecretKeys(t *testing.T) *seal.Keyring {
	k, err := seal.New(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// PutSecrets stores an instance and a binding whose parameters and
// credentials hold the marker, sealed, through every write path. With
// leak set, it also puts the marker in plain text in a field that is not
// secret, the control that shows the scan would see it.
func PutSecrets(t *testing.T, s store.Store, keys *seal.Keyring, leak bool) {
	ctx := context.Background()
	sealAs := func(what, secret string) []byte {
		b, err := keys.Seal([]byte(`{"password":"`+secret+`"}`), []byte(what))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in := Instance("b1", "i1", "cf1")
	in.SealedParameters = sealAs("parameters\x00b1\x00i1", SecretMarker)
	bd := Binding("b1", "i1", "x1")
	bd.SealedParameters = sealAs("parameters\x00b1\x00i1\x00x1", SecretMarker)
	bd.SealedCredentials = sealAs("credentials\x00b1\x00i1\x00x1", SecretMarker)
	if leak {
		in.LastOperation.Description = "the password is " + SecretMarker
	}
	MustPutInstance(t, s, in)
	MustPutBinding(t, s, bd)
	// A console session whose id (its cookie) is the marker: the store
	// keeps only the id's hash. With leak, its Who shows the marker, the
	// control that the scan reads sessions too.
	se := Session("alice", T0.Add(time.Hour))
	if leak {
		se.Who = SecretMarker
	}
	if err := s.PutSession(ctx, store.SessionKeyOf(SecretMarker), se); err != nil {
		t.Fatal(err)
	}
	in2, bd2 := in, bd
	in2.InstanceID, bd2.BindingID = "i2", "x2"
	if _, err := s.Import(ctx, []store.Entry{{Instance: &in2}, {Binding: &bd2}}, true); err != nil {
		t.Fatal(err)
	}
	// With the key, the secret comes back.
	got, err := s.GetBinding(ctx, "b1", "i1", "x1")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := keys.Open(got.SealedCredentials, []byte("credentials\x00b1\x00i1\x00x1"))
	if err != nil || !bytes.Contains(plain, []byte(SecretMarker)) {
		t.Fatalf("Open of the stored credentials = %q, %v", plain, err)
	}
}

// RevealsSecret reports whether v shows the marker: in its bytes, or in the
// body of an inventory record it holds once inflated (the whole of v, or
// what follows a NUL in it: a Redis member holds its record after its ids).
func RevealsSecret(v []byte) bool {
	if bytes.Contains(v, []byte(SecretMarker)) {
		return true
	}
	// A record may start anywhere: a Redis member holds an instance's
	// record and its bindings' after ids and lengths.
	found := false
	for i := 0; i < len(v) && !found; i++ {
		store.Unpack(v[i:], func(_ string, body []byte) error {
			found = bytes.Contains(body, []byte(SecretMarker))
			return nil
		})
	}
	return found
}
