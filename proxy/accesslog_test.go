package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
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
		}, observe.WithAccessLog(nil, NewAccessLog(&out, format, lv), fixed, nil))
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
