package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAccessLogWriter(t *testing.T) {
	fixed := func() time.Time { return time.Date(2026, 11, 22, 3, 4, 5, 6e6, time.UTC) }
	run := func(format string, level slog.Level, status int, id string) string {
		var out bytes.Buffer
		lv := new(slog.LevelVar)
		lv.Set(level)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Broker-API-Request-Identity", id)
		_, _ = serveStage(r, func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			s.Tenant, s.Broker, s.Call.InstanceID = "t", "b", "i 1"
			w.WriteHeader(status)
		}, withAccessLog(nil, NewAccessLog(&out, format, lv), fixed))
		return out.String()
	}

	line := run("json", slog.LevelInfo, 201, "id-\"quoted\"\n\x01\xff")
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, line)
	}
	want := map[string]any{"time": "2026-11-22T03:04:05.006Z", "level": "INFO", "msg": "request",
		"request_id": "id-\"quoted\"\n\x01\ufffd", "method": "GET", "tenant": "t", "broker": "b", "endpoint": "unknown",
		"instance_id": "i 1", "status": float64(201), "bytes": float64(0)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if _, ok := got["duration_us"]; !ok || !strings.HasSuffix(line, "}\n") {
		t.Errorf("line: %s", line)
	}

	text := run("text", slog.LevelInfo, 503, "abc")
	if !strings.HasPrefix(text, "time=2026-11-22T03:04:05.006Z level=WARN msg=request request_id=abc method=GET tenant=t broker=b endpoint=unknown instance_id=\"i 1\" status=503 ") {
		t.Errorf("text line: %s", text)
	}
	if out := run("json", slog.LevelWarn, 200, "x"); out != "" {
		t.Errorf("info line written at level warn: %s", out)
	}
}

// TestAccessTimeMatchesAppendFormat: the cached per-second stamp formats
// every instant as time.AppendFormat does, across seconds, zones and
// years.
func TestAccessTimeMatchesAppendFormat(t *testing.T) {
	a := NewAccessLog(io.Discard, "json", nil)
	zones := []*time.Location{time.UTC, time.FixedZone("x", -(3*3600 + 30*60)), time.FixedZone("y", 5*3600+45*60)}
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for i := range 5000 {
		tm := base.Add(time.Duration(i) * 997 * time.Microsecond).In(zones[i/7%len(zones)])
		got := string(a.appendTime(nil, tm))
		if want := tm.Format(accessTimeFormat); got != want {
			t.Fatalf("%v: got %s, want %s", tm, got, want)
		}
	}
}

// FuzzAppendJSONString: an access-log string decodes to what encoding/json
// would have written (invalid UTF-8 as U+FFFD, byte by byte).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "id-\"quoted\"\n\x01\xff", "é\u2028<&>", "\\\t\r\x7f", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("appendJSONString(%q) is not a JSON string: %v", s, err)
		}
		ref, _ := json.Marshal(s)
		_ = json.Unmarshal(ref, &want)
		if got != want {
			t.Errorf("appendJSONString(%q) decodes to %q, encoding/json's to %q", s, got, want)
		}
	})
}
