package rules

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 9, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, value string
		want        time.Duration
		ok          bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero", "0", 0, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"too many seconds", "99999999999999999999999", time.Duration(maxRetryAfterSeconds) * time.Second, true},
		{"IMF-fixdate", "Fri, 09 Jan 2026 10:00:30 GMT", 30 * time.Second, true},
		{"RFC 850 date", "Friday, 09-Jan-26 10:01:00 GMT", time.Minute, true},
		{"asctime date", "Fri Jan  9 10:00:05 2026", 5 * time.Second, true},
		{"date in the past", "Fri, 09 Jan 2026 09:00:00 GMT", 0, true},
		{"empty", "", 0, false},
		{"negative", "-1", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "10s", 0, false},
		{"space", " 10", 0, false},
		{"date in another zone", "Fri, 09 Jan 2026 10:00:30 CET", 0, false},
		{"words", "soon", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAfter(tt.value, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}
