package proxy

import (
	"testing"
	"unsafe"
)

// maxScopeSize keeps a Scope in the 704-byte size class: an object with
// pointers of more than 512 bytes carries an 8-byte header, and one more
// byte costs every request 64 B (the next class is 768).
const maxScopeSize = 704 - 8

// TestScopeAllocSizeClass: a field added to the Scope must fit the padding
// or replace something, or every request allocates 64 B more.
func TestScopeAllocSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(Scope{}); got > maxScopeSize {
		t.Errorf("a Scope is %d bytes, more than %d: reorder its fields (bools together) or shrink it", got, maxScopeSize)
	}
}
