package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// jsonEncode is what the encoder must match: encoding/json with HTML
// escaping off, without the Encoder's newline.
func jsonEncode(r *Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkEncoding compares appendRecord and appendBody with encoding/json
// for r: the same bytes, or both an error.
func checkEncoding(t *testing.T, r *Record) {
	t.Helper()
	want, wantErr := jsonEncode(r)
	got, err := appendRecord([]byte("prefix"), r)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("record %+v: appendRecord error %v, encoding/json error %v", r, err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("record %+v:\n got %s\nwant %s", r, got[len("prefix"):], want)
	}
	c := *r
	c.PrevHash, c.Hash = GenesisHash, ""
	want, _ = jsonEncode(&c)
	body, err := encode(nil, r, r.KeyID)
	if err != nil || !bytes.Equal(body, want) {
		t.Fatalf("body of %+v (error %v):\n got %s\nwant %s", r, err, body, want)
	}
}

// oddStrings are strings that exercise escaping.
var oddStrings = []string{
	"", "plain", `quote " and backslash \`, "<html> & 'apos'", "tab\tnewline\nreturn\rback\bfeed\f",
	"\x00\x01\x1f\x7f", "\u2028line\u2029para", "héllo wörld ✓ 😀", "\xff", "bad \xc3\x28 utf8",
	"cut \xe2\x82", "\xed\xa0\x80 surrogate", "\uFFFD real replacement", "\xf4\x90\x80\x80 beyond", "/slash/",
	strings.Repeat("x", 300), "é\x80\u2028\x00\"",
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	base := benchRecord()
	full := *base
	full.Error = &Error{Code: "ConcurrencyError", Description: "busy"}
	full.Findings = []Finding{{Rule: "request.plan_id.required", Direction: "request"}, {Rule: "r2", Direction: "response"}}
	full.Blocked, full.Orphan, full.Bridged, full.FromCache, full.PollShield, full.Protection = true, "queued", true, true, "shared", "rate_limit"
	full.Identity = &Identity{Platform: "kubernetes", Username: "duke", Undecodable: true}
	full.Policy, full.PoliciesReported = "size-cap", []string{"a", "b"}
	full.PolicyChanges = []PolicyChange{{Policy: "p", Parameter: "region", Action: "force"}, {}}
	full.PrevHash, full.Hash = GenesisHash, strings.Repeat("ab", 32)
	tests := []struct {
		name string
		edit func(r *Record)
	}{
		{"zero record", func(r *Record) { *r = Record{} }},
		{"realistic", func(*Record) {}},
		{"every member", func(r *Record) { *r = full }},
		{"empty error", func(r *Record) { r.Error = &Error{} }},
		{"error code only", func(r *Record) { r.Error = &Error{Code: "c"} }},
		{"error description only", func(r *Record) { r.Error = &Error{Description: "d"} }},
		{"empty identity", func(r *Record) { r.Identity = &Identity{} }},
		{"empty, not nil, slices", func(r *Record) { r.Findings, r.ParameterKeys = []Finding{}, []string{} }},
		{"empty finding", func(r *Record) { r.Findings = []Finding{{}} }},
		{"empty parameter key", func(r *Record) { r.ParameterKeys = []string{"", "a"} }},
		{"negative status", func(r *Record) { r.Status = -1 }},
		{"large status", func(r *Record) { r.Status = math.MaxInt64 }},
		{"time with a zone", func(r *Record) { r.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", -(5*3600+30*60))) }},
		{"time with a zone of seconds", func(r *Record) { r.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600+59)) }},
		{"time zone of 24 hours", func(r *Record) { r.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 24*3600)) }},
		{"time zone of -23:59", func(r *Record) { r.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -(23*3600+59*60))) }},
		{"zero time", func(r *Record) { r.Time = time.Time{} }},
		{"year 0", func(r *Record) { r.Time = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"year 9999", func(r *Record) { r.Time = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) }},
		{"year 10000", func(r *Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"negative year", func(r *Record) { r.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"local time", func(r *Record) { r.Time = time.Unix(1_800_000_000, 120).In(time.Local) }},
		{"monotonic clock reading", func(r *Record) { r.Time = time.Now() }},
		{"NaN duration", func(r *Record) { r.DurationMS = math.NaN() }},
		{"infinite duration", func(r *Record) { r.DurationMS = math.Inf(-1) }},
		{"hash set, prev_hash empty", func(r *Record) { r.Hash = "h" }},
		{"odd hashes", func(r *Record) { r.PrevHash, r.Hash = "\u2028\"", "\xff" }},
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.001, 12.345, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21,
		-1e21, 123456789.123, 5e-324, math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-100, 0.1 + 0.2} {
		tests = append(tests, struct {
			name string
			edit func(r *Record)
		}{"duration " + fmtFloat(f), func(r *Record) { r.DurationMS = f }})
	}
	for i, s := range oddStrings {
		tests = append(tests, struct {
			name string
			edit func(r *Record)
		}{"odd string " + string(rune('a'+i)), func(r *Record) {
			*r = full
			setStrings(r, func() string { return s })
		}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := *base
			tc.edit(&r)
			checkEncoding(t, &r)
		})
	}
}

func fmtFloat(f float64) string { b, _ := appendFloat(nil, f); return string(b) }

// setStrings sets every string of r, its identity, error, findings and
// parameter keys (those it has) to next().
func setStrings(r *Record, next func() string) {
	for _, p := range []*string{&r.RequestID, &r.TraceID, &r.Tenant, &r.Broker, &r.Endpoint, &r.Method, &r.InstanceID,
		&r.BindingID, &r.ServiceID, &r.PlanID, &r.APIVersion, &r.Outcome, &r.Operation, &r.Orphan, &r.PollShield, &r.Protection, &r.PrevHash, &r.Hash,
		&r.ClientAddr, &r.ForwardedFor, &r.Username, &r.ClientCertSubject, &r.KeyID, &r.Policy} {
		*p = next()
	}
	if r.Identity != nil {
		r.Identity = &Identity{Platform: next(), UserID: next(), Username: next(), Undecodable: r.Identity.Undecodable}
	}
	if r.Error != nil {
		r.Error = &Error{Code: next(), Description: next()}
	}
	fs := make([]Finding, len(r.Findings))
	for i := range fs {
		fs[i] = Finding{Rule: next(), Direction: next()}
	}
	r.Findings = fs
	ks := make([]string, len(r.ParameterKeys))
	for i := range ks {
		ks[i] = next()
	}
	r.ParameterKeys = ks
	if len(r.PoliciesReported) > 0 {
		r.PoliciesReported = []string{next(), next()}
	}
	if len(r.PolicyChanges) > 0 {
		pcs := make([]PolicyChange, len(r.PolicyChanges))
		for i := range pcs {
			pcs[i] = PolicyChange{Policy: next(), Parameter: next(), Action: next()}
		}
		r.PolicyChanges = pcs
	}
}

// randomString mixes odd strings, random bytes and random runes.
func randomString(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return ""
	case 1:
		return oddStrings[rng.IntN(len(oddStrings))]
	case 2:
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	var sb strings.Builder
	for range rng.IntN(12) {
		switch rng.IntN(4) {
		case 0:
			sb.WriteByte(byte(rng.IntN(0x80)))
		case 1:
			sb.WriteRune(rune(0x80 + rng.IntN(0x800)))
		case 2:
			sb.WriteRune(rune(0x2020 + rng.IntN(16)))
		default:
			sb.WriteRune(rune(rng.IntN(utf8.MaxRune + 1)))
		}
	}
	return sb.String()
}

// randomRecord is a record with every member present or absent at
// random.
func randomRecord(rng *rand.Rand) *Record {
	r := &Record{
		Time:              time.Unix(rng.Int64N(400_000_000_000)-100_000_000_000, rng.Int64N(2_000_000_000)),
		Status:            rng.IntN(1200) - 100,
		AcceptsIncomplete: rng.IntN(2) == 0, Blocked: rng.IntN(2) == 0, Bridged: rng.IntN(2) == 0, FromCache: rng.IntN(2) == 0,
	}
	switch rng.IntN(3) {
	case 0:
		r.Time = r.Time.UTC()
	case 1:
		r.Time = r.Time.In(time.FixedZone("", rng.IntN(2*26*3600)-26*3600))
	}
	switch rng.IntN(4) {
	case 0:
		r.DurationMS = float64(rng.Int64N(10_000_000)) / 1000
	case 1:
		r.DurationMS = math.Float64frombits(rng.Uint64())
	case 2:
		r.DurationMS = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))
	}
	if rng.IntN(2) == 0 {
		r.Identity = &Identity{Undecodable: rng.IntN(2) == 0}
	}
	if rng.IntN(2) == 0 {
		r.Error = &Error{}
	}
	r.Findings = make([]Finding, rng.IntN(4))
	r.ParameterKeys = make([]string, rng.IntN(4))
	setStrings(r, func() string { return randomString(rng) })
	return r
}

func TestEncodeMatchesEncodingJSONRandomly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 10000
	if testing.Short() {
		n = 1000
	}
	encoded := 0
	for range n {
		r := randomRecord(rng)
		checkEncoding(t, r)
		if _, err := jsonEncode(r); err == nil {
			encoded++
		}
	}
	if encoded < n/2 { // the rest: times or durations encoding/json refuses
		t.Errorf("only %d of %d random records could be encoded", encoded, n)
	}
}

func FuzzEncodeMatchesEncodingJSON(f *testing.F) {
	f.Add("req-1", "cf", "provision", "", "2.17", int64(1_800_000_000), int64(999), 0, 201, 12.345, uint16(0))
	f.Add("\u2028\"\\", "\xff\xfe", "é\x00", "<&>", "\t", int64(-62_135_596_800), int64(0), 3600+59, -1, 1e-7, uint16(0xffff))
	f.Add("", "", "", "", "", int64(253_402_300_800), int64(1), -86400, 0, 1e21, uint16(0x5555))
	f.Fuzz(func(t *testing.T, s1, s2, s3, s4, s5 string, sec, nsec int64, zone, status int, dur float64, flags uint16) {
		strs := []string{s1, s2, s3, s4, s5}
		i := 0
		next := func() string { s := strs[i%len(strs)]; i++; return s }
		r := &Record{Time: time.Unix(sec, nsec).In(time.FixedZone("", zone%(100*3600))), Status: status, DurationMS: dur,
			AcceptsIncomplete: flags&1 != 0, Blocked: flags&2 != 0, Bridged: flags&4 != 0, FromCache: flags&8 != 0}
		if flags&16 != 0 {
			r.Time = r.Time.UTC()
		}
		if flags&32 != 0 {
			r.Identity = &Identity{Undecodable: flags&64 != 0}
		}
		if flags&128 != 0 {
			r.Error = &Error{}
		}
		r.Findings = make([]Finding, flags>>8&3)
		r.ParameterKeys = make([]string, flags>>10&3)
		setStrings(r, next)
		if flags&0x1000 != 0 { // some members empty
			r.TraceID, r.Tenant, r.Operation = "", "", ""
		}
		checkEncoding(t, r)
	})
}

// TestEncoderKnowsEveryField fails when a member is added to Record or
// the types it holds: the encoder must learn it (and the lists below).
func TestEncoderKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v    any
		tags string
	}{
		{Record{}, "time request_id trace_id,omitempty client_addr,omitempty forwarded_for,omitempty " +
			"username,omitempty client_cert_subject,omitempty tenant,omitempty broker,omitempty endpoint method " +
			"instance_id,omitempty binding_id,omitempty service_id,omitempty plan_id,omitempty identity,omitempty " +
			"api_version,omitempty accepts_incomplete,omitempty status duration_ms outcome operation,omitempty " +
			"error,omitempty findings,omitempty blocked orphan_mitigation,omitempty bridged,omitempty " +
			"from_cache,omitempty poll_shield,omitempty protection,omitempty policy,omitempty policies_reported,omitempty policy_changes,omitempty origin,omitempty action,omitempty operator,omitempty parameter_keys,omitempty key_id,omitempty " +
			"prev_hash hash,omitempty"},
		{Identity{}, "platform user_id,omitempty username,omitempty undecodable,omitempty"},
		{Error{}, "code,omitempty description,omitempty"},
		{Finding{}, "rule direction"},
		{PolicyChange{}, "policy parameter action"},
	} {
		typ := reflect.TypeOf(tc.v)
		var tags []string
		for i := range typ.NumField() {
			tags = append(tags, typ.Field(i).Tag.Get("json"))
		}
		if got := strings.Join(tags, " "); got != tc.tags {
			t.Errorf("%s members changed; teach appendRecord and this test:\n got %s\nwant %s", typ, got, tc.tags)
		}
	}
}
