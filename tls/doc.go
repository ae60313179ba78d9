// Package tls holds the gateway's TLS: the client side it uses toward
// brokers (CA bundles, client certificates for mTLS, server names) and,
// later, the listener side (certmagic ACME, on-demand, certificate files).
//
// Import it under another name, e.g. gwtls, next to crypto/tls.
package tls
