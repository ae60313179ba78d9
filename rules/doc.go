// Package rules holds the gateway's knowledge of the Open Service Broker API as
// pure functions over tables: which endpoint a request calls, which API version
// each endpoint and feature needs and how a platform's version is negotiated
// with a broker's, what the gateway drops, forwards or refuses for a broker
// whose version predates part of a call (PredatedRules), the request and
// response rules per endpoint and version, how mutating calls lock, and the
// orphan-mitigation table.
//
// Payloads are read here, once, and what was read is handed back beside the
// findings: CheckRequest returns the decoded *Request, CheckResponse (and
// ReadResponse, without the checks) an Answer, and a catalog's Index serves
// tenants' views of it. The HTTP layer branches on those values and never
// decodes the same bytes again.
//
// Nothing here does I/O or keeps state that changes: the tables are set once
// at package initialisation and only read afterwards, so every function is
// safe for concurrent use. Failures are *osb.Error values carrying the status
// and description the platform should see.
package rules
