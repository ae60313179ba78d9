// Package tls holds the gateway's TLS: the listener side (Server:
// certificates from an ACME CA with certmagic, at start or on demand, or
// from files re-read when they change; client certificates and the
// per-tenant rules for them), the client side toward brokers (Upstream:
// CA bundles, client certificates for mTLS, server names, minimum
// versions), and what "osb-gateway check" and start-up report about both
// (CheckFiles, Warnings).
//
// Import it under another name, e.g. gwtls, next to crypto/tls.
package tls
