package core

import (
	"testing"
	"unsafe"
)

// maxScopeSize keeps a Scope in the 768-byte size class: an object with
// pointers of more than 512 bytes carries an 8-byte header, and one byte
// more costs every request 128 B (the next class is 896).
const maxScopeSize = 768 - 8

// TestScopeAllocSizeClass: a field added to the Scope must fit the padding
// or replace something, or every request allocates a size class more.
// (Bools sit together: padding after each would cost 7 bytes.)
func TestScopeAllocSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(Scope{}); got > maxScopeSize {
		t.Errorf("a Scope is %d bytes, more than %d: reorder its fields (bools together) or shrink it", got, maxScopeSize)
	}
}

// TestScopeSize logs the Scope's size, so the room left shows in -v runs.
func TestScopeSize(t *testing.T) {
	t.Logf("a Scope is %d bytes; the limit is %d", unsafe.Sizeof(Scope{}), maxScopeSize)
}
