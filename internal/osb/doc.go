// Package osb holds the Open Service Broker API wire vocabulary shared by the
// gateway, the rules and the sample broker: header names, the API version
// type, error codes and the one OSB error type with its writer.
//
// It parses and formats; it decides nothing.
package osb

// Header names defined by the Open Service Broker API.
const (
	// HeaderAPIVersion carries the platform's API version, "MAJOR.MINOR".
	HeaderAPIVersion = "X-Broker-API-Version"
	// HeaderOriginatingIdentity identifies the user behind a call (OSB 2.13):
	// "<platform> <base64 JSON>".
	HeaderOriginatingIdentity = "X-Broker-API-Originating-Identity"
	// HeaderRequestIdentity correlates one call across platform, gateway and
	// broker (OSB 2.15).
	HeaderRequestIdentity = "X-Broker-API-Request-Identity"
)

// Error codes the specification defines for the "error" field.
const (
	CodeAsyncRequired           = "AsyncRequired"
	CodeConcurrencyError        = "ConcurrencyError"
	CodeRequiresApp             = "RequiresApp"
	CodeMaintenanceInfoConflict = "MaintenanceInfoConflict"
)
