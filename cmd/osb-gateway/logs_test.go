package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestJSONLogsWriteDurationsAsStrings: a duration in a JSON log line reads
// as gateway.yaml writes it ("1m30s"), not as slog's integer nanoseconds
// (it was 90000000000).
func TestJSONLogsWriteDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	l := newLogs(config.Log{Format: "json", Level: "info"}, &buf)
	l.log.Info("shutting down", slog.Duration("grace", 90*time.Second), slog.Int("n", 3))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if line["grace"] != "1m30s" || line["n"] != float64(3) {
		t.Errorf("logged %s", buf.Bytes())
	}
}
