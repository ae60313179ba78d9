// Package audit keeps the gateway's audit log: one JSON record per
// platform call, written after the response, to standard output or to a
// file rotated by size.
//
// A record holds who called what and what came of it; it never holds
// credentials, Authorization headers, request or response bodies, or the
// values of "parameters" (at most their top-level keys). The originating
// identity is decoded to its platform and user id or user name.
//
// Records are chained: each carries hash, the SHA-256 of its own line
// without the hash member (prev_hash included), and prev_hash, the hash of
// the previous record. The chain continues across rotations and restarts,
// so an edited, removed, inserted or reordered record breaks it at that
// record or the next; Verify finds the first break. With a key
// (audit.hmac_key_file) the hash is an HMAC-SHA256 (key.go), so that who
// edits the file cannot recompute it.
//
// Records removed from the end of the newest file leave no trace in the
// chain itself: the file sink keeps the chain's head (file, record count,
// last hash) in a head file beside it, rewritten at each flush, and hands
// it out to be logged at an interval (head.go); Verify compares the files
// with a head.
package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// Record is one audited platform call. Fields are the gateway's own
// findings and the ids the call names; empty fields are left out.
type Record struct {
	// Time is when the gateway received the call, in UTC.
	Time time.Time `json:"time"`
	// RequestID is X-Broker-API-Request-Identity (the platform's, or the
	// gateway's own).
	RequestID string `json:"request_id"`
	// TraceID is the W3C trace id of the call's server span.
	TraceID string `json:"trace_id,omitempty"`
	// ClientAddr is the IP address of the connection's peer: the
	// platform, or the load balancer in front of it.
	ClientAddr string `json:"client_addr,omitempty"`
	// ForwardedFor is the client address a trusted proxy
	// (listen.trusted_proxies) put in X-Forwarded-For: the rightmost
	// address there that is not itself a trusted proxy. Empty when the
	// peer is not trusted or sent none.
	ForwardedFor string `json:"forwarded_for,omitempty"`
	// Username is the tenant credential's username, never its password:
	// the credential the call authenticated with or, for refused
	// credentials, the username presented when it is one of the tenant's
	// (a secret typed into the username field is never written). Empty
	// before auth ran, and for a call a client certificate authenticated
	// alone.
	Username string `json:"username,omitempty"`
	// ClientCertSubject is the subject of the connection's verified client
	// certificate (mTLS), such as "CN=cloud-controller,O=example".
	ClientCertSubject string `json:"client_cert_subject,omitempty"`
	Tenant            string `json:"tenant,omitempty"`
	Broker            string `json:"broker,omitempty"`
	// Endpoint is the OSB endpoint ("provision", "unknown" for paths that
	// are none).
	Endpoint   string `json:"endpoint"`
	Method     string `json:"method"`
	InstanceID string `json:"instance_id,omitempty"`
	BindingID  string `json:"binding_id,omitempty"`
	ServiceID  string `json:"service_id,omitempty"`
	PlanID     string `json:"plan_id,omitempty"`
	// Identity is the decoded X-Broker-API-Originating-Identity.
	Identity *Identity `json:"identity,omitempty"`
	// APIVersion is the platform's X-Broker-API-Version, once accepted.
	APIVersion        string `json:"api_version,omitempty"`
	AcceptsIncomplete bool   `json:"accepts_incomplete,omitempty"`
	// Status is the status sent to the platform (499: it went away first).
	Status     int     `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	// Outcome is forwarded, blocked, rejected, denied (by a policy:
	// Policy names it), served_from_cache, failed or retired (a retired broker's unbind or deprovision the gateway
	// answered 410 Gone, brokers[].retired: {answer: gone});
	// for an action the gateway took itself (Origin "gateway"), what came
	// of it: "settled succeeded", "still in progress", "gone", "poll
	// failed", "forced failed", "released", …
	Outcome string `json:"outcome"`
	// Operation is the broker's operation of an asynchronous call.
	Operation string `json:"operation,omitempty"`
	// Error is the gateway's own error answer.
	Error *Error `json:"error,omitempty"`
	// Findings are the OSB rules the request or response broke.
	Findings []Finding `json:"findings,omitempty"`
	// Blocked is set when another operation on the instance was in
	// progress.
	Blocked bool `json:"blocked"`
	// Orphan is the orphan-mitigation decision: "reported" or "queued".
	Orphan    string `json:"orphan_mitigation,omitempty"`
	Bridged   bool   `json:"bridged,omitempty"`
	FromCache bool   `json:"from_cache,omitempty"`
	// PollShield is, for a last_operation poll answered by the poll
	// shield, where the broker's answer came from: "shared" (another
	// poll's broker call in flight) or "reused" (an in progress answer
	// within brokers[].poll.min_interval).
	PollShield string `json:"poll_shield,omitempty"`
	// Protection names the protection that answered instead of the broker
	// ("rate_limit", "overload", "policy", …); empty when none did.
	Protection string `json:"protection,omitempty"`
	// Policy names the policy that denied the call (Outcome "denied").
	Policy string `json:"policy,omitempty"`
	// PoliciesReported names the policies in report mode that would have
	// denied the call.
	PoliciesReported []string `json:"policies_reported,omitempty"`
	// PolicyChanges are the parameters policies set (names, never values).
	PolicyChanges []PolicyChange `json:"policy_changes,omitempty"`
	// Origin is "gateway" for a record of an action the gateway took
	// itself rather than a platform call: an operator's reconcile, forced
	// state or release of an operation, or accept of a catalog, or the
	// background reconciler's poll. Empty for a platform call.
	Origin string `json:"origin,omitempty"`
	// Action is what the gateway did on its own (Origin "gateway"):
	// "reconcile" (a last_operation poll of its own), "force" (a final
	// state an operator set), "release" (a lock an operator released) or
	// "accept" (a broker's latest catalog an operator accepted).
	Action string `json:"action,omitempty"`
	// Operator names who asked for the action: the admin caller (its
	// X-Operator header and address), the console's user, or
	// "reconciler" for the background reconciler. Never a token.
	Operator string `json:"operator,omitempty"`
	// ParameterKeys are the top-level keys of the request's "parameters"
	// (audit.parameters: keys), never their values.
	ParameterKeys []string `json:"parameter_keys,omitempty"`
	// KeyID names the HMAC key of a keyed chain (audit.hmac_key_file; see
	// KeyID); empty in a plain SHA-256 chain. The Writer sets it.
	KeyID string `json:"key_id,omitempty"`
	// PrevHash and Hash chain the records; the Writer sets them.
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash,omitempty"`
}

// PolicyChange is a parameter a policy set.
type PolicyChange struct {
	Policy    string `json:"policy"`
	Parameter string `json:"parameter"`
	// Action is "force" (set whatever the platform sent) or "default" (set
	// because the platform sent none).
	Action string `json:"action"`
}

// Identity is a decoded originating identity: the platform and one user
// identifier, nothing else of the header's JSON.
type Identity struct {
	Platform string `json:"platform"`
	// UserID is Cloud Foundry's user_id; Username is used by platforms
	// without one (Kubernetes).
	UserID   string `json:"user_id,omitempty"`
	Username string `json:"username,omitempty"`
	// Undecodable is set when the value was not base64-encoded JSON.
	Undecodable bool `json:"undecodable,omitempty"`
}

// Error is the gateway's error answer: OSB error code and description.
type Error struct {
	Code        string `json:"code,omitempty"`
	Description string `json:"description,omitempty"`
}

// Finding is one broken OSB rule, by id.
type Finding struct {
	Rule      string `json:"rule"`
	Direction string `json:"direction"`
}

// Limits on values taken from requests, so that a record stays small.
const (
	maxPlatformLen  = 64
	maxUserLen      = 256
	maxParamKeys    = 64
	maxParamKeyLen  = 128
	maxIdentityJSON = 8 << 10
)

// ParameterKeys returns the sorted top-level keys of a "parameters"
// object (at most 64, each cut at 128 bytes), or nil when it is absent or
// not an object. Values are never looked at beyond their extent.
func ParameterKeys(params json.RawMessage) []string {
	params = bytes.TrimSpace(params)
	if len(params) == 0 || params[0] != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, capLen(k, maxParamKeyLen))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // keys cut to the same prefix
	if len(keys) > maxParamKeys {
		keys = keys[:maxParamKeys]
	}
	return keys
}

// BodyParameterKeys returns ParameterKeys of the "parameters" member of a
// request body, for calls whose body the gateway did not decode.
func BodyParameterKeys(body []byte) []string {
	var v struct {
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	return ParameterKeys(v.Parameters)
}

func capLen(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// isToken reports whether s holds only letters, digits and "-._".
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}
