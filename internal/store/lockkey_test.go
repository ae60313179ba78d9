package store

import (
	"testing"
)

func TestBindingLockKey(t *testing.T) {
	if got, want := BindingLockKey("b1", "i1", "x1"), LockKey("b1", "i1")+"/x1"; got != want {
		t.Errorf("BindingLockKey = %q, want %q", got, want)
	}
}
