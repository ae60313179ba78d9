package rules

import (
	"encoding/json"
	"time"
)

// Result is what a broker's success answer to a provision, update or bind
// (or to GET instance and GET binding) tells about the resource, for the
// gateway's inventory: the fields it keeps to answer for the broker later.
// Raw fields hold the broker's JSON byte for byte; nil when absent.
type Result struct {
	// DashboardURL is dashboard_url (provision, update, GET instance).
	DashboardURL string
	// Metadata is the metadata object (OSB 2.16; a bind's carries
	// expires_at and renew_before).
	Metadata json.RawMessage
	// Credentials is a bind's credentials object: a secret.
	Credentials json.RawMessage
	// SyslogDrainURL, RouteServiceURL, VolumeMounts and Endpoints are a
	// bind's fields of those names.
	SyslogDrainURL  string
	RouteServiceURL string
	VolumeMounts    json.RawMessage
	Endpoints       json.RawMessage
	// ExpiresAt and RenewBefore are metadata.expires_at and
	// metadata.renew_before (OSB 2.17), zero when absent or not a
	// timestamp.
	ExpiresAt, RenewBefore time.Time
}

// ReadResult reads what a success answer's body says of the resource
// (Result). It reads only what the inventory keeps, once the call has
// succeeded; a body that is not a JSON object says nothing. It is not on
// the hot path: only successful mutating calls are read.
func ReadResult(body []byte) Result {
	var raw struct {
		DashboardURL    json.RawMessage `json:"dashboard_url"`
		Metadata        json.RawMessage `json:"metadata"`
		Credentials     json.RawMessage `json:"credentials"`
		SyslogDrainURL  json.RawMessage `json:"syslog_drain_url"`
		RouteServiceURL json.RawMessage `json:"route_service_url"`
		VolumeMounts    json.RawMessage `json:"volume_mounts"`
		Endpoints       json.RawMessage `json:"endpoints"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return Result{}
	}
	r := Result{
		DashboardURL: jsonString(raw.DashboardURL), SyslogDrainURL: jsonString(raw.SyslogDrainURL),
		RouteServiceURL: jsonString(raw.RouteServiceURL),
		Metadata:        jsonObject(raw.Metadata), Credentials: jsonObject(raw.Credentials),
		VolumeMounts: rawArray(raw.VolumeMounts), Endpoints: rawArray(raw.Endpoints),
	}
	if r.Metadata != nil {
		var md struct {
			ExpiresAt   string `json:"expires_at"`
			RenewBefore string `json:"renew_before"`
		}
		if json.Unmarshal(r.Metadata, &md) == nil {
			r.ExpiresAt, _ = time.Parse(time.RFC3339, md.ExpiresAt)
			r.RenewBefore, _ = time.Parse(time.RFC3339, md.RenewBefore)
		}
	}
	return r
}

// jsonString is the string a raw JSON value holds, "" for another type.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonObject is raw when it is a JSON object, else nil.
func jsonObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	return raw
}

// rawArray is raw when it is a JSON array, else nil.
func rawArray(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	return raw
}
