package store

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of the inventory record layout, below the Store contract.

func TestRecordRoundTrip(t *testing.T) {
	for _, in := range []Instance{
		testInstance("b1", "i1", "cf1"),
		{Broker: "b", InstanceID: "i"},
		{Broker: "b", InstanceID: "i", Tenant: strings.Repeat("t", MaxNameLen), SealedParameters: []byte{0}},
	} {
		prepared, rec, err := PrepareInstance(in, t0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeInstance(in.Broker, in.InstanceID, rec)
		if d := cmp.Diff(prepared, got); err != nil || d != "" {
			t.Errorf("decode of %s = %v; diff (-want +got):\n%s", in.InstanceID, err, d)
		}
	}
	bd := testBinding("b1", "i1", "x1")
	_, rec, err := PrepareBinding(bd, t0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBinding("b1", "i1", "x1", rec)
	if d := cmp.Diff(bd, got); err != nil || d != "" {
		t.Errorf("decode of a binding = %v; diff (-want +got):\n%s", err, d)
	}
}

// TestRecordFormats checks that a record of real content is deflated, a
// tiny one stays plain, and both keep the tenant at the head.
func TestRecordFormats(t *testing.T) {
	_, big, _ := PrepareInstance(testInstance("b1", "i1", "cf1"), t0)
	_, tiny, _ := PrepareInstance(Instance{Broker: "b", InstanceID: "i", Tenant: "cf1", Created: t0, Updated: t0}, t0)
	for name, tc := range map[string]struct {
		rec    []byte
		format byte
	}{"full": {big, recordDeflated}, "tiny": {tiny, recordPlain}} {
		if tc.rec[0] != tc.format {
			t.Errorf("%s record has format %d, want %d", name, tc.rec[0], tc.format)
		}
		if tenant, ok := RecordTenant(tc.rec); !ok || tenant != "cf1" || !SameTenant(tc.rec, "cf1") || SameTenant(tc.rec, "cf") {
			t.Errorf("%s record: tenant %q, %t", name, tenant, ok)
		}
	}
	// A Cloud Controller instance deflates to about half.
	cc := benchInstance()
	if plain, packed := encodeInstance(cc), pack(encodeInstance(cc)); len(packed) > len(plain)*55/100 {
		t.Errorf("deflated record is %d bytes of %d plain, want at most 55%%", len(packed), len(plain))
	}
}

// TestRecordSkipsUnknownFields reads a record holding a field of a newer
// gateway: the field is skipped, the rest read.
func TestRecordSkipsUnknownFields(t *testing.T) {
	w := newRecord("cf1", 0)
	w.str(tagServiceID, "svc")
	w.str(200, "from the future")
	w.str(tagPlanID, "plan")
	got, err := DecodeInstance("b", "i", pack(w.b))
	want := Instance{Broker: "b", InstanceID: "i", Tenant: "cf1", ServiceID: "svc", PlanID: "plan"}
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("decode = %v; diff (-want +got):\n%s", err, d)
	}
}

// deflated is a record of format recordDeflated whose body is body
// deflated.
func deflated(t *testing.T, body []byte) []byte {
	var buf bytes.Buffer
	buf.Write([]byte{recordDeflated, 0})
	w, _ := flate.NewWriterDict(&buf, flate.BestCompression, recordDictionary)
	w.Write(body)
	w.Close()
	return buf.Bytes()
}

func TestRecordDamaged(t *testing.T) {
	_, good, _ := PrepareInstance(testInstance("b1", "i1", "cf1"), t0)
	plainField := newRecord("", 0)
	plainField.str(tagServiceID, "svc")
	badTime := newRecord("", 0)
	badTime.bytes(tagCreated, []byte{0x80}) // a varint that does not end
	tests := []struct {
		name string
		rec  []byte
	}{
		{"empty", nil},
		{"format 3", append([]byte{3}, good[1:]...)},
		{"tenant longer than the record", []byte{recordPlain, 10, 'a'}},
		{"tenant length above the limit", append([]byte{recordPlain, MaxNameLen + 1}, make([]byte, 200)...)},
		{"deflated body truncated", good[:len(good)-10]},
		{"deflated body not deflate", append(bytes.Clone(good[:2+len("cf1")]), 0xff, 0xff, 0xff)},
		{"plain field truncated", plainField.b[:len(plainField.b)-1]},
		{"field length beyond the record", append(bytes.Clone(plainField.b[:3]), 0xff, 0xff, 0x03)},
		{"bad time", badTime.b},
		{"inflates beyond MaxRecordLen", deflated(t, make([]byte, MaxRecordLen+100))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeInstance("b", "i", tc.rec)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "instance b/i") {
				t.Errorf("decode: %v, want ErrUnavailable naming the instance", err)
			}
			_, err = DecodeBinding("b", "i", "x", tc.rec)
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("decode as a binding: %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestCursor(t *testing.T) {
	c := EncodeCursor("b{1}", "i 1/é")
	if strings.ContainsAny(c, "+/=&?# ") {
		t.Errorf("cursor %q is not URL-safe", c)
	}
	broker, id, ok, err := decodeCursor(c)
	if err != nil || !ok || broker != "b{1}" || id != "i 1/é" {
		t.Errorf("decodeCursor = %q, %q, %t, %v", broker, id, ok, err)
	}
	if _, _, ok, err := decodeCursor(""); ok || err != nil {
		t.Errorf(`decodeCursor("") = %t, %v; want the start`, ok, err)
	}
}

// FuzzInstanceRecord puts arbitrary values through prepare, encode, pack
// and decode: what comes back is what was prepared.
func FuzzInstanceRecord(f *testing.F) {
	f.Add("cf1", "svc", `{"a":1}`, []byte("sealed"), "provision", "succeeded", "desc", 200, int64(0), int64(1))
	f.Add("", "", "", []byte(nil), "", "", "", 0, int64(-62135596800000000), int64(253402300799999999))
	f.Fuzz(func(t *testing.T, tenant, service, context string, sealed []byte, kind, state, desc string,
		status int, started, ended int64) {
		in := Instance{
			Broker: "b", InstanceID: "i", Tenant: tenant, ServiceID: service, PlanID: service + "-plan",
			Context: json.RawMessage(context), DashboardURL: desc, SealedParameters: sealed,
			LastOperation: LastOperation{Kind: kind, State: state, Description: desc, Status: status,
				Started: time.UnixMicro(started), Ended: time.UnixMicro(ended)},
		}
		prepared, rec, err := PrepareInstance(in, t0)
		if err != nil {
			return
		}
		got, err := DecodeInstance("b", "i", rec)
		if err != nil {
			t.Fatalf("decode of a prepared record: %v", err)
		}
		if d := cmp.Diff(prepared, got); d != "" {
			t.Fatalf("round trip (-prepared +decoded):\n%s", d)
		}
	})
}

// FuzzDecodeRecord decodes arbitrary bytes: an error or a record, never a
// panic.
func FuzzDecodeRecord(f *testing.F) {
	_, good, _ := PrepareInstance(testInstance("b1", "i1", "cf1"), t0)
	_, goodB, _ := PrepareBinding(testBinding("b1", "i1", "x1"), t0)
	f.Add(good)
	f.Add(goodB)
	f.Add([]byte{recordPlain, 0, tagServiceID, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, rec []byte) {
		DecodeInstance("b", "i", rec)
		DecodeBinding("b", "i", "x", rec)
	})
}

// TestRecordDashboardURL checks that a dashboard URL holding the instance
// id is stored without it and read back whole, wherever the id is in it.
func TestRecordDashboardURL(t *testing.T) {
	const id = "0b2a9e64-3c1d-4f0a-9d4e-6a1f2b3c4d5e"
	for _, url := range []string{
		"https://db.example.com/dashboard/" + id,
		id + "/dashboard",
		"https://db.example.com/" + id + "/" + id,
		"https://db.example.com/other",
		"",
	} {
		in := testInstance("b1", id, "cf1")
		in.DashboardURL = url
		_, rec, err := PrepareInstance(in, t0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeInstance("b1", id, rec)
		if err != nil || got.DashboardURL != url {
			t.Errorf("dashboard URL %q came back as %q, %v", url, got.DashboardURL, err)
		}
		// The context names the instance after its id too.
		want := strings.Count(string(in.Context), id) + max(strings.Count(url, id)-1, 0)
		if got := strings.Count(string(encodeInstance(in)), id); got != want {
			t.Errorf("dashboard URL %q: the plain record holds the id %d times, want %d", url, got, want)
		}
	}
	bad := newRecord("", 0)
	bad.bytes(tagDashboardURLAt, []byte{5, 'a', 'b'}) // the id's offset past the URL
	if _, err := DecodeInstance("b1", id, bad.b); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a dashboard URL offset past its end decoded with %v, want ErrUnavailable", err)
	}
}
