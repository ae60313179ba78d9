package rules

import (
	"bytes"
	"encoding/json"
)

// SameJSON reports whether two JSON values are equal as values (member
// order and spacing aside); absent (empty) equals absent and {}. A value
// that is not JSON equals nothing but its own bytes. The inventory's
// emulations use it to tell a repeated request from a different one.
func SameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if len(a) == 0 {
		a = []byte("{}")
	}
	if len(b) == 0 {
		b = []byte("{}")
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// AppGUID is the app a bind request binds: its top-level app_guid, else
// bind_resource.app_guid; "" when neither is there (or bind_resource is
// not an object).
func AppGUID(req *Request) string {
	if req.AppGUID != "" {
		return req.AppGUID
	}
	var br struct {
		AppGUID string `json:"app_guid"`
	}
	if len(req.BindResource) == 0 || json.Unmarshal(req.BindResource, &br) != nil {
		return ""
	}
	return br.AppGUID
}
