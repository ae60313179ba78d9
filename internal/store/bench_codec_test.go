package store

import (
	"encoding/json"
	"testing"
	"time"
)

func BenchmarkInventoryRecordSize(b *testing.B) {
	in := benchInstance()
	_, rec, err := PrepareInstance(in, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	js, _ := json.Marshal(in)
	b.ReportMetric(float64(len(rec)), "B/record")
	b.ReportMetric(float64(len(js)), "B/json")
	bd := benchBinding(in)
	_, brec, err := PrepareBinding(bd, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	bjs, _ := json.Marshal(bd)
	b.ReportMetric(float64(len(brec)), "B/binding-record")
	b.ReportMetric(float64(len(bjs)), "B/binding-json")
}

// BenchmarkInventoryPack measures packing and unpacking one record (the
// deflate of inventory_pack.go) and the sizes before and after.
func BenchmarkInventoryPack(b *testing.B) {
	plain := encodeInstance(benchInstance())
	packed := pack(plain)
	b.Run("pack", func(b *testing.B) {
		for range b.N {
			pack(plain)
		}
		b.ReportMetric(float64(len(plain)), "B/plain")
		b.ReportMetric(float64(len(packed)), "B/packed")
	})
	b.Run("unpack", func(b *testing.B) {
		for range b.N {
			if err := Unpack(packed, func(string, []byte) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			if _, err := DecodeInstance("b", "i", packed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
