package rules

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      Call
		status int
		body   string
		want   Answer
	}{
		{"poll in progress", instanceLastOp, 200, `{"state":"in progress","description":"10% done"}`,
			Answer{Status: 200, Object: true, State: PollInProgress}},
		{"poll failed keeps the description", bindingLastOp, 200, `{"state":"failed","description":"disk full"}`,
			Answer{Status: 200, Object: true, State: PollFailed, Description: "disk full"}},
		{"poll with a bad description still ends", instanceLastOp, 200, `{"state":"succeeded","description":7}`,
			Answer{Status: 200, Object: true, State: PollSucceeded}},
		{"state read as encoding/json reads it", instanceLastOp, 200, `{"state":"in progress","State":"succ\u0065eded"}`,
			Answer{Status: 200, Object: true, State: PollSucceeded}},
		{"state not a string", instanceLastOp, 200, `{"state":1}`, Answer{Status: 200, Object: true}},
		{"poll gone", instanceLastOp, 410, ``, Answer{Status: 410, State: PollGone}},
		{"poll gone with a body", bindingLastOp, 410, `{}`, Answer{Status: 410, Object: true, State: PollGone}},
		{"poll not JSON", instanceLastOp, 200, `{"state":"succeeded"`, Answer{Status: 200}},
		{"410 to a deprovision is no poll state", deprovisionSync, 410, `{}`, Answer{Status: 410, Object: true}},
		{"202 operation", provisionCall, 202, `{"operation":"task-1"}`, Answer{Status: 202, Object: true, Operation: "task-1"}},
		{"202 without operation", bindAsync, 202, ` { } `, Answer{Status: 202, Object: true}},
		{"202 not an object", provisionCall, 202, `["task-1"]`, Answer{Status: 202}},
		{"error description", provisionSync, 422, `{"error":"AsyncRequired","description":"needs async"}`,
			Answer{Status: 422, Object: true, Description: "needs async", Code: "AsyncRequired"}},
		{"error code of its own", provisionSync, 500, `{"error":"DiskFull"}`, Answer{Status: 500, Object: true, Code: "DiskFull"}},
		{"cut short", provisionSync, 201, ``, Answer{Status: 201}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReadResponse(tc.c, tc.status, []byte(tc.body))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadResponse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnswerEnds(t *testing.T) {
	for _, tc := range []struct {
		state  string
		polled Endpoint
		want   bool
	}{
		{PollSucceeded, Provision, true},
		{PollFailed, Bind, true},
		{PollInProgress, Deprovision, false},
		{PollGone, Deprovision, true},
		{PollGone, Unbind, true},
		{PollGone, Provision, false},
		{PollGone, Update, false},
		{PollGone, Bind, false},
		{"", Deprovision, false},
		{"done", Deprovision, false},
	} {
		if got := (Answer{State: tc.state}).Ends(tc.polled); got != tc.want {
			t.Errorf("state %q polling %s: Ends = %v, want %v", tc.state, tc.polled, got, tc.want)
		}
	}
}

// TestReadResponseAllocs: reading a poll answer, the hot path, allocates
// nothing.
func TestReadResponseAllocs(t *testing.T) {
	body := []byte(`{"state":"in progress","description":"creating the database"}`)
	if n := testing.AllocsPerRun(100, func() { ReadResponse(instanceLastOp, 200, body) }); n != 0 {
		t.Errorf("ReadResponse of a poll answer: %v allocations, want 0", n)
	}
}

// jsonAnswer reads what ReadResponse reads with encoding/json, as the
// gateway did before it read answers once: for the differential fuzz test.
func jsonAnswer(c Call, status int, body []byte) Answer {
	a := Answer{Status: status}
	var obj map[string]json.RawMessage
	a.Object = json.Unmarshal(body, &obj) == nil && obj != nil
	var fields struct {
		Operation   json.RawMessage `json:"operation"`
		State       json.RawMessage `json:"state"`
		Description json.RawMessage `json:"description"`
		Error       json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &fields) != nil || !a.Object {
		fields.Operation, fields.State, fields.Description, fields.Error = nil, nil, nil, nil
	}
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	lastOp := c.Endpoint == InstanceLastOperation || c.Endpoint == BindingLastOperation
	switch {
	case lastOp && status == http.StatusGone:
		a.State = PollGone
	case lastOp && status == http.StatusOK:
		a.State = str(fields.State)
		if a.State == PollFailed {
			a.Description = str(fields.Description)
		}
	case status >= 200 && status <= 299:
		a.Operation = str(fields.Operation)
	case status >= 400 && status <= 599:
		a.Description = str(fields.Description)
		a.Code = str(fields.Error)
	}
	return a
}

// FuzzReadResponse checks ReadResponse against encoding/json's reading of
// the same fields.
func FuzzReadResponse(f *testing.F) {
	for _, tt := range append(append([]responseCase(nil), responseStatusCases...), responseBodyCases...) {
		f.Add([]byte(tt.body), uint8(tt.call.Endpoint), uint16(tt.status))
	}
	f.Add([]byte(`{"STATE":"failed","Description":"x\u00e9","description":"y"}`), uint8(InstanceLastOperation), uint16(200))
	f.Add([]byte("{\"operation\":\"\xff\\n\",\"Operation\":null}"), uint8(Provision), uint16(202))
	f.Add([]byte(`{"description":"a","description":"b"} `), uint8(Bind), uint16(500))
	f.Add([]byte(`{"ſtate":"succeeded","\u0053TATE ":"failed"}`), uint8(BindingLastOperation), uint16(200))
	f.Add([]byte(`{"operation":"a","OPERATION":5}`), uint8(Update), uint16(202))
	f.Add([]byte(`{"Error":"AsyncRequired","error":"Async\u0052equired"}`), uint8(Bind), uint16(422))
	f.Fuzz(func(t *testing.T, body []byte, endpoint uint8, status uint16) {
		c := Call{Endpoint: Endpoint(endpoint % uint8(len(endpoints)))}
		got, want := ReadResponse(c, int(status), body), jsonAnswer(c, int(status), body)
		if got != want {
			t.Fatalf("ReadResponse %+v, encoding/json %+v", got, want)
		}
	})
}
