package config

import "testing"

// TestNamespaceUUIDVectors pins the namespace of routes[].ids for good: a
// UUID is itself (in any form uuid.Parse reads), any other string the
// UUIDv5 of "osb-gateway:" + it in the URL namespace. A change here
// changes the ids every registration made through such a route holds.
// (Checked against Python's uuid.uuid5(uuid.NAMESPACE_URL,
// "osb-gateway:cf-one").)
func TestNamespaceUUIDVectors(t *testing.T) {
	tests := []struct{ namespace, want string }{
		{"cf-one", "512ba68c-3195-522f-ad64-86c69128262f"},
		{"cf-two", "c70ef27d-05a3-54fa-9cdf-487ef8eece70"},
		{"0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e", "0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e"},
		{"urn:uuid:0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e", "0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e"},
		{"{0B5C2D0E-3F4A-4B6C-8D9E-1F2A3B4C5D6E}", "0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e"},
	}
	for _, tt := range tests {
		if got := (RouteIDs{Namespace: tt.namespace}).NamespaceUUID().String(); got != tt.want {
			t.Errorf("namespace %q: %s, want %s", tt.namespace, got, tt.want)
		}
	}
}
