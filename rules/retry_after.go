package rules

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfterSeconds is the longest Retry-After RetryAfter returns, the
// longest a time.Duration holds; a longer number of seconds is as good as
// "never", and is read as this.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// RetryAfter reads a Retry-After value (RFC 9110, section 10.2.3, which OSB
// 2.15 names for last_operation answers): a whole number of seconds, or an
// HTTP-date in any of the three forms a recipient must accept, taken
// relative to now (a date in the past is 0). ok is false for anything else,
// an empty value included.
func RetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	if value == "" {
		return 0, false
	}
	if digitsOnly(value) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n > maxRetryAfterSeconds { // only too many digits fail here
			n = maxRetryAfterSeconds
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// digitsOnly reports whether s is made of ASCII digits only (1*DIGIT: no
// sign, no space, no fraction).
func digitsOnly(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// retryAfterExample is an HTTP-date, as the rule's description shows one.
const retryAfterExample = "Fri, 09 Jan 2026 10:00:00 GMT"

// checkRetryAfter checks the Retry-After header values of a last_operation
// answer (response.last_operation.retry_after): one value, a whole number
// of seconds or an HTTP-date. A platform that cannot read it polls at its
// own pace or not at all; the gateway reads it to know how long an "in
// progress" answer may serve other polls.
func checkRetryAfter(c Call, values []string, vs *violationList) {
	if len(values) == 0 || !lastOperations.has(c.Endpoint) {
		return
	}
	const rule = "response.last_operation.retry_after"
	if len(values) > 1 {
		vs.addResponse(rule, fmt.Sprintf("the broker's answer to %s must have one Retry-After header, got %d",
			c.Endpoint.describe(), len(values)))
		return
	}
	if _, ok := RetryAfter(values[0], time.Time{}); !ok {
		vs.addResponse(rule, fmt.Sprintf("Retry-After in the broker's answer to %s must be a whole number of seconds or an HTTP-date such as %q, got %s",
			c.Endpoint.describe(), retryAfterExample, quoteCut(values[0])))
	}
}
