package audit

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// benchRecord is a realistic record: a provision through the gateway with
// an identity, a trace id and parameter keys.
func benchRecord() *Record {
	return &Record{
		Time:       time.Date(2026, 11, 22, 3, 18, 0, 999123456, time.UTC),
		RequestID:  "46d1819c-5f0c-4c5d-8e9f-0a1b2c3d4e5f",
		TraceID:    "0af7651916cd43dd8448eb211c80319c",
		Tenant:     "cf-prod",
		Broker:     "mysql",
		Endpoint:   "provision",
		Method:     "PUT",
		InstanceID: "5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
		ServiceID:  "b9698740-4810-4dc5-8da6-54581f5108c4",
		PlanID:     "fb740fd7-2029-467a-9256-63ecd882f11c",
		Identity:   &Identity{Platform: "cloudfoundry", UserID: "683ea748-3092-4ff4-b656-39cacc4d5360"},
		APIVersion: "2.17", AcceptsIncomplete: true,
		Status: 202, DurationMS: 12.345, Outcome: "forwarded", Operation: "op-1234",
		ParameterKeys: []string{"admin_password", "size"},
	}
}

// benchConfig is a file sink with the interval fsync policy (the
// default), rotated at 16 MiB with one rotated file kept, so that the
// files written stay small (the page cache is not flooded).
func benchConfig(b *testing.B) config.Audit {
	return config.Audit{Sink: config.AuditSinkFile, Path: filepath.Join(b.TempDir(), "audit.log"), MaxSize: "16MiB",
		MaxFiles: 1, Fsync: config.AuditFsyncInterval, FsyncInterval: time.Second, Parameters: config.AuditParametersKeys}
}

// BenchmarkWrite writes a realistic record to a file sink with the
// interval fsync policy (the default): encoding, chaining and buffering.
func BenchmarkWrite(b *testing.B) {
	w, err := Open(benchConfig(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteParallel is BenchmarkWrite from concurrent callers, as the
// gateway calls it.
func BenchmarkWriteParallel(b *testing.B) {
	w, err := Open(benchConfig(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := benchRecord()
		for pb.Next() {
			if err := w.Write(r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEncode compares the record encoder with encoding/json, which it
// replaces.
func BenchmarkEncode(b *testing.B) {
	r := benchRecord()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = encode(buf[:0], r, "")
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := *r
			c.PrevHash = GenesisHash
			if _, err := jsonEncode(&c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
