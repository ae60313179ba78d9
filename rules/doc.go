// Package rules holds the gateway's knowledge of the Open Service Broker API as
// pure functions over tables: which endpoint a request calls, which API version
// each endpoint and feature needs, and the request and response rules per
// endpoint and version.
//
// Nothing here does I/O or keeps state that changes: the tables are set once
// at package initialisation and only read afterwards, so every function is
// safe for concurrent use. Failures are *osb.Error values carrying the status
// and description the platform should see.
package rules
