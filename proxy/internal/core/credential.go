package core

// Credential is a tenant's username and password as the auth stage
// compares them. It holds SHA-256 digests, so comparisons run in constant time
// over fixed-length values whatever the lengths presented.
type Credential struct {
	User   [32]byte // SHA-256 of the username
	Pair   [32]byte // the auth stage's presentedDigest of username and password
	Bcrypt []byte   // non-nil: Pair is unused, compare with bcrypt
	Name   string   // the username, for logs and audit records
}
