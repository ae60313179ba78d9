package rules

import "strings"

// The query parameters Classify reads, as indexes into queryParams and bits
// in parseQuery's duplicate check.
const (
	paramAcceptsIncomplete = iota
	paramServiceID
	paramPlanID
	paramOperation
)

// queryParams names the query parameters Classify reads.
var queryParams = [...]string{
	paramAcceptsIncomplete: "accepts_incomplete",
	paramServiceID:         "service_id",
	paramPlanID:            "plan_id",
	paramOperation:         "operation",
}

// setParam stores the decoded value of queryParams[i] in c. A switch rather
// than a table of setters: an indirect call would move c to the heap.
func setParam(c *Call, i int, v string) error {
	switch i {
	case paramAcceptsIncomplete:
		return setAcceptsIncomplete(c, v)
	case paramServiceID:
		c.ServiceID = v
	case paramPlanID:
		c.PlanID = v
	case paramOperation:
		c.Operation = v
	}
	return nil
}

// setAcceptsIncomplete reads accepts_incomplete: "true" or "false", nothing
// else, so that the gateway and the broker never disagree on whether a call
// may be asynchronous.
func setAcceptsIncomplete(c *Call, v string) error {
	switch v {
	case "true":
		c.AcceptsIncomplete = true
	case "false":
		c.AcceptsIncomplete = false
	default:
		return badRequest("query parameter accepts_incomplete must be \"true\" or \"false\"; the request has %q",
			truncate(v, maxEchoedPath))
	}
	return nil
}

// parseQuery reads the parameters in queryParams from rawQuery into c. It
// splits on "&" and decodes like url.ParseQuery, but refuses what brokers'
// parsers disagree on: ";" separators (some frameworks split on them,
// Go drops the pair), malformed percent-escapes (Go drops the pair, others
// keep it literally) and repeated known parameters (Go's Get takes the first,
// others the last).
func parseQuery(rawQuery string, c *Call) error {
	if strings.IndexByte(rawQuery, ';') >= 0 {
		return badRequest("the query contains \";\"; separate parameters with \"&\"")
	}
	var seen uint
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := queryUnescape(rawKey)
		if err != nil {
			return badRequest("query parameter name %q is not validly percent-encoded", truncate(rawKey, maxEchoedPath))
		}
		i := paramIndex(key)
		if i < 0 {
			if !validEscapes(rawValue) {
				return badRequest("query parameter %q has a value that is not validly percent-encoded",
					truncate(key, maxEchoedPath))
			}
			continue
		}
		name := queryParams[i]
		if seen&(1<<i) != 0 {
			return badRequest("query parameter %s appears more than once", name)
		}
		seen |= 1 << i
		value, err := queryUnescape(rawValue)
		if err != nil {
			return badRequest("query parameter %s has a value that is not validly percent-encoded", name)
		}
		if err := setParam(c, i, value); err != nil {
			return err
		}
	}
	return nil
}

// paramIndex returns the index of the parameter named key in queryParams, or
// -1.
func paramIndex(key string) int {
	for i := range queryParams {
		if queryParams[i] == key {
			return i
		}
	}
	return -1
}

// validEscapes reports whether every "%" in s starts a two-digit hex escape,
// without decoding s.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}
