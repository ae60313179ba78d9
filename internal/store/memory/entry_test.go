package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestEntryJSON checks the export format: an entry's JSON line, and a
// store exported to JSON lines and imported from them into another.
func TestEntryJSON(t *testing.T) {
	in := store.Instance{Broker: "b1", InstanceID: "i1", Tenant: "cf1", Context: json.RawMessage(`{"platform":"cf"}`),
		SealedParameters: []byte{1, 2, 3},
		LastOperation:    store.LastOperation{Kind: store.KindProvision, State: store.StateSucceeded, Status: 201, Ended: storetest.T0},
		Created:          storetest.T0, Updated: storetest.T0}
	line, err := json.Marshal(store.Entry{Instance: &in})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"instance":{"broker":"b1","instance_id":"i1","tenant":"cf1","context":{"platform":"cf"},` +
		`"sealed_parameters":"AQID","last_operation":{"kind":"provision","state":"succeeded","status":201,` +
		`"ended":"2031-05-06T07:08:09Z"},"created":"2031-05-06T07:08:09Z","updated":"2031-05-06T07:08:09Z"}}`
	if string(line) != want {
		t.Errorf("JSON of an entry:\n got %s\nwant %s", line, want)
	}

	ctx := context.Background()
	src, dst := openMemoryForTest(t, osbtest.NewClock(storetest.T0).Now), openMemoryForTest(t, osbtest.NewClock(storetest.T0).Now)
	storetest.ListFixture(t, src)
	storetest.MustPutBinding(t, src, storetest.Binding("b1", "i1", "x1"))
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for e, err := range src.Export(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	var entries []store.Entry
	dec := json.NewDecoder(&lines)
	dec.DisallowUnknownFields()
	for dec.More() {
		var e store.Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	if _, err := dst.Import(ctx, entries, false); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(storetest.ExportAll(t, src), storetest.ExportAll(t, dst)); d != "" {
		t.Errorf("store imported from JSON lines (-source +imported):\n%s", d)
	}
}
