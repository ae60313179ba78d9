// Package osbtest is what the gateway's tests stand on, kept in one place
// so that no test package grows its own copy: a clock that moves only when
// the test moves it ([Clock]), a certificate authority that issues
// certificates for TLS tests ([CA]), a fake broker on a loopback listener
// that records what reaches it ([Broker]), a buffer that servers'
// goroutines write while the test reads it ([Buffer]), and, for tests that
// run the real binary, a free loopback address ([FreeAddr]) and the
// gateway built once per test process ([GatewayBinary]).
//
// Tests, the helper packages of tests and the load benchmark import it,
// nothing the gateway ships. Its constructors panic where they cannot go
// on, as httptest.NewServer does, so that a caller without a testing.TB
// (the load benchmark) can use them too.
package osbtest
