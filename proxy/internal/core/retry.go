package core

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RetryAfterSecs is the Retry-After of a refusal that can be retried after d:
// whole seconds, rounded up, at least 1.
func RetryAfterSecs(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// RetryHeader is a Retry-After header of secs seconds.
func RetryHeader(secs int64) http.Header {
	return http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
}

// Count adds one to c, which is nil for a Gateway built without
// Metrics.
func Count(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}
