package audit

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
)

// The encoder below writes a Record as encoding/json does with HTML
// escaping off (json.Encoder.SetEscapeHTML(false)), byte for byte, without
// reflection: members in field order, the same omitempty rules, time as
// time.Time.MarshalJSON writes it, numbers and strings formatted and
// escaped as encoding/json does. TestEncodeMatchesEncodingJSON and
// FuzzEncodeMatchesEncodingJSON hold it to that; a field added to Record,
// Identity, Error or Finding must be added here too (TestEncoderKnowsEveryField).

// appendRecord appends the JSON of r, prev_hash and hash as r has them.
func appendRecord(dst []byte, r *Record) ([]byte, error) {
	dst, err := appendMembers(dst, r)
	if err != nil {
		return dst, err
	}
	dst = appendKeyID(dst, r.KeyID)
	dst = append(dst, `"prev_hash":`...)
	dst = jsonfast.AppendString(dst, r.PrevHash)
	if r.Hash != "" {
		dst = append(dst, `,"hash":`...)
		dst = jsonfast.AppendString(dst, r.Hash)
	}
	return append(dst, '}'), nil
}

// appendBody appends the JSON of r with keyID as its key_id (instead of
// r.KeyID), GenesisHash as its prev_hash, its last member, and no hash:
// the body that the Writer chains and hashes.
func appendBody(dst []byte, r *Record, keyID string) ([]byte, error) {
	dst, err := appendMembers(dst, r)
	if err != nil {
		return dst, err
	}
	dst = appendKeyID(dst, keyID)
	dst = append(dst, `"prev_hash":"`...)
	dst = append(dst, GenesisHash...)
	return append(dst, `"}`...), nil
}

// appendMembers appends "{" and the members of r before prev_hash, each
// followed by a comma.
func appendMembers(dst []byte, r *Record) ([]byte, error) {
	dst = append(dst, `{"time":`...)
	dst, err := appendTime(dst, r.Time)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `,"request_id":`...)
	dst = jsonfast.AppendString(dst, r.RequestID)
	dst = appendOmitEmpty(dst, `,"trace_id":`, r.TraceID)
	dst = appendOmitEmpty(dst, `,"client_addr":`, r.ClientAddr)
	dst = appendOmitEmpty(dst, `,"forwarded_for":`, r.ForwardedFor)
	dst = appendOmitEmpty(dst, `,"username":`, r.Username)
	dst = appendOmitEmpty(dst, `,"client_cert_subject":`, r.ClientCertSubject)
	dst = appendOmitEmpty(dst, `,"tenant":`, r.Tenant)
	dst = appendOmitEmpty(dst, `,"broker":`, r.Broker)
	dst = append(dst, `,"endpoint":`...)
	dst = jsonfast.AppendString(dst, r.Endpoint)
	dst = append(dst, `,"method":`...)
	dst = jsonfast.AppendString(dst, r.Method)
	dst = appendOmitEmpty(dst, `,"instance_id":`, r.InstanceID)
	dst = appendOmitEmpty(dst, `,"binding_id":`, r.BindingID)
	dst = appendOmitEmpty(dst, `,"service_id":`, r.ServiceID)
	dst = appendOmitEmpty(dst, `,"plan_id":`, r.PlanID)
	if id := r.Identity; id != nil {
		dst = append(dst, `,"identity":{"platform":`...)
		dst = jsonfast.AppendString(dst, id.Platform)
		dst = appendOmitEmpty(dst, `,"user_id":`, id.UserID)
		dst = appendOmitEmpty(dst, `,"username":`, id.Username)
		if id.Undecodable {
			dst = append(dst, `,"undecodable":true`...)
		}
		dst = append(dst, '}')
	}
	dst = appendOmitEmpty(dst, `,"api_version":`, r.APIVersion)
	if r.AcceptsIncomplete {
		dst = append(dst, `,"accepts_incomplete":true`...)
	}
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, `,"duration_ms":`...)
	dst, err = appendFloat(dst, r.DurationMS)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `,"outcome":`...)
	dst = jsonfast.AppendString(dst, r.Outcome)
	dst = appendOmitEmpty(dst, `,"operation":`, r.Operation)
	if e := r.Error; e != nil {
		dst = append(dst, `,"error":{`...)
		sep := ""
		if e.Code != "" {
			dst = append(dst, `"code":`...)
			dst = jsonfast.AppendString(dst, e.Code)
			sep = ","
		}
		if e.Description != "" {
			dst = append(dst, sep...)
			dst = append(dst, `"description":`...)
			dst = jsonfast.AppendString(dst, e.Description)
		}
		dst = append(dst, '}')
	}
	if len(r.Findings) > 0 {
		dst = append(dst, `,"findings":[`...)
		for i, f := range r.Findings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"rule":`...)
			dst = jsonfast.AppendString(dst, f.Rule)
			dst = append(dst, `,"direction":`...)
			dst = jsonfast.AppendString(dst, f.Direction)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"blocked":`...)
	dst = strconv.AppendBool(dst, r.Blocked)
	dst = appendOmitEmpty(dst, `,"orphan_mitigation":`, r.Orphan)
	if r.Bridged {
		dst = append(dst, `,"bridged":true`...)
	}
	if r.FromCache {
		dst = append(dst, `,"from_cache":true`...)
	}
	dst = appendOmitEmpty(dst, `,"poll_shield":`, r.PollShield)
	dst = appendOmitEmpty(dst, `,"protection":`, r.Protection)
	dst = appendPolicy(dst, r)
	dst = appendOmitEmpty(dst, `,"origin":`, r.Origin)
	dst = appendOmitEmpty(dst, `,"action":`, r.Action)
	dst = appendOmitEmpty(dst, `,"operator":`, r.Operator)
	if len(r.ParameterKeys) > 0 {
		dst = append(dst, `,"parameter_keys":[`...)
		for i, k := range r.ParameterKeys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonfast.AppendString(dst, k)
		}
		dst = append(dst, ']')
	}
	return append(dst, ','), nil
}

// appendKeyID appends the key_id member and a comma, unless id is empty.
func appendKeyID(dst []byte, id string) []byte {
	if id == "" {
		return dst
	}
	return append(jsonfast.AppendString(append(dst, `"key_id":`...), id), ',')
}

// appendOmitEmpty appends the member key (with its leading comma) and s,
// unless s is empty.
func appendOmitEmpty(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return jsonfast.AppendString(append(dst, key...), s)
}

// errTimeZone and errYear are time.Time.MarshalJSON's refusals.
var (
	errYear     = errors.New("Time.MarshalJSON: year outside of range [0,9999]")
	errTimeZone = errors.New("Time.MarshalJSON: timezone hour outside of range [0,23]")
)

// appendTime appends t quoted as time.Time.MarshalJSON writes it (RFC 3339
// with nanoseconds, trailing zeros dropped), refusing what it refuses.
func appendTime(dst []byte, t time.Time) ([]byte, error) {
	dst = append(dst, '"')
	n0 := len(dst)
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	switch {
	case dst[n0+len("9999")] != '-': // the year is not 4 digits wide
		return dst, errYear
	case dst[len(dst)-1] != 'Z':
		c := dst[len(dst)-len("Z07:00")]
		h := dst[len(dst)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return dst, errTimeZone
		}
	}
	return append(dst, '"'), nil
}

// appendFloat appends f as encoding/json writes a float64: like
// JavaScript (ES6), exponent notation below 1e-6 and from 1e21, without a
// zero-padded exponent. NaN and infinities are refused.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, errors.New("json: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}
