package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// hideNames is a view filter: it hides the services and plans (as
// "service/plan") it names.
type hideNames []string

func (h hideNames) service(s *osb.Service) bool { return !h.has(s.Name) }
func (h hideNames) plan(s *osb.Service, p *osb.Plan) bool {
	return !h.has(s.Name + "/" + p.Name)
}
func (h hideNames) has(name string) bool {
	for _, n := range h {
		if n == name {
			return true
		}
	}
	return false
}

// TestIndexView: a view is the broker's bytes but for what it hides: a
// dropped element goes with the separator before it (the one after it,
// for the first).
func TestIndexView(t *testing.T) {
	const odd = `{ "x-top": [1, 2],
  "services": [ {"name": "a", "id": "sa", "plans": [ {"name": "p1", "id": "a1"} ,
      {"name": "p2", "id": "a2", "x": {"y": "]}"}}, {"name":"p3","id":"a3"}]},
    {"name": "b", "id": "sb", "x-extra": {"keep": [1, 2]},
     "plans": [{"name": "p1", "id": "b1"}]} ,{"name":"c","id":"sc","plans":[{"name":"p1","id":"c1"}]}
  ] }`
	for _, tc := range []struct {
		name, body string
		hide       hideNames
		want       string // "": the body itself
	}{
		{name: "nothing hidden", body: odd},
		{name: "a middle plan", body: odd, hide: hideNames{"a/p2"},
			want: strings.Replace(odd, ` ,
      {"name": "p2", "id": "a2", "x": {"y": "]}"}}`, "", 1)},
		{name: "the first plan", body: odd, hide: hideNames{"a/p1"},
			want: strings.Replace(odd, `{"name": "p1", "id": "a1"} ,
      `, "", 1)},
		{name: "the last plans", body: odd, hide: hideNames{"a/p2", "a/p3"},
			want: strings.Replace(odd, ` ,
      {"name": "p2", "id": "a2", "x": {"y": "]}"}}, {"name":"p3","id":"a3"}`, "", 1)},
		{name: "the first service", body: odd, hide: hideNames{"a"},
			want: strings.Replace(odd, `{"name": "a", "id": "sa", "plans": [ {"name": "p1", "id": "a1"} ,
      {"name": "p2", "id": "a2", "x": {"y": "]}"}}, {"name":"p3","id":"a3"}]},
    `, "", 1)},
		{name: "a service left with no plan", body: odd, hide: hideNames{"b/p1"},
			want: strings.Replace(odd, `,
    {"name": "b", "id": "sb", "x-extra": {"keep": [1, 2]},
     "plans": [{"name": "p1", "id": "b1"}]}`, "", 1)},
		{name: "the last service", body: odd, hide: hideNames{"c"},
			want: strings.Replace(odd, ` ,{"name":"c","id":"sc","plans":[{"name":"p1","id":"c1"}]}`, "", 1)},
		{name: "every service", body: odd, hide: hideNames{"a", "b", "c"}, want: `{ "x-top": [1, 2],
  "services": [ 
  ] }`},
		{name: "a service without plans goes", body: `{"services":[{"name":"a","plans":[]},{"name":"b"}]}`,
			want: `{"services":[]}`},
		{name: "keys as encoding/json matches them", hide: hideNames{"a/p1"},
			body: `{"SERVICES":[{"name":"a","plans":[{"name":"x"}],"Pl\u0061ns":[{"name":"p1"},{"name":"p2"}]}]}`,
			want: `{"SERVICES":[{"name":"a","plans":[{"name":"x"}],"Pl\u0061ns":[{"name":"p2"}]}]}`},
		{name: "no services", body: `{"services": null}`, hide: hideNames{"a"}},
		{name: "empty services", body: `{"services": [ ]}`, hide: hideNames{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, _, err := NewIndex([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ix.View(tc.hide.service, tc.hide.plan)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.body
			}
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("View mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzIndexView checks View against decoding: what it serves is valid JSON
// that decodes to the catalog with the hidden services and plans left out.
func FuzzIndexView(f *testing.F) {
	f.Add([]byte(`{"services":[{"name":"a","plans":[{"name":"p1"},{"name":"p2"}]},{"name":"b","plans":[{"name":"p1"}]}]}`), uint8(0b0110))
	f.Add([]byte(`{"Services":[{"name":"a","PLANS":[{"name":"p1"}],"plans":[{"name":"p2"}]}],"services":[{"name":"b","plans":[{"name":"p1"}]}]}`), uint8(1))
	f.Add([]byte(` {"services" : [ null , {"name":"a","plans":null} ] } `), uint8(3))
	f.Fuzz(func(t *testing.T, body []byte, mask uint8) {
		ix, _, err := NewIndex(body)
		if err != nil {
			return
		}
		// mask hides services and plans by their position's parity and
		// the first letter of their names.
		hidden := func(name string, i int) bool { return mask>>(uint(i+len(name))%8)&1 == 1 }
		var want osb.Catalog
		for i, s := range ix.Catalog().Services {
			if hidden(s.Name, i) {
				continue
			}
			keep := s
			keep.Plans = nil
			for j, p := range s.Plans {
				if !hidden(p.Name, j+i+1) {
					keep.Plans = append(keep.Plans, p)
				}
			}
			if len(keep.Plans) > 0 {
				want.Services = append(want.Services, keep)
			}
		}
		servicePos := map[*osb.Service]int{}
		for i := range ix.Catalog().Services {
			servicePos[&ix.Catalog().Services[i]] = i
		}
		planPos := func(s *osb.Service, p *osb.Plan) int {
			for j := range s.Plans {
				if &s.Plans[j] == p {
					return j
				}
			}
			t.Fatal("a plan not of its service")
			return 0
		}
		view, err := ix.View(
			func(s *osb.Service) bool { return !hidden(s.Name, servicePos[s]) },
			func(s *osb.Service, p *osb.Plan) bool { return !hidden(p.Name, planPos(s, p)+servicePos[s]+1) })
		if errors.Is(err, errCatalogSpans) && repeatsFolded(body, "services", "plans") {
			return // encoding/json merged the repeats; no bytes say that
		}
		if err != nil {
			t.Fatalf("View: %v", err)
		}
		if !json.Valid(view) {
			t.Fatalf("View is not valid JSON: %s", view)
		}
		got, _, err := NewIndex(view)
		if err != nil {
			t.Fatalf("View does not decode: %v\n%s", err, view)
		}
		if diff := cmp.Diff(want.Services, got.Catalog().Services, cmp.Comparer(func(a, b json.RawMessage) bool {
			return string(a) == string(b)
		})); diff != "" && (len(want.Services) > 0 || len(got.Catalog().Services) > 0) {
			t.Errorf("View decodes to another catalog (-want +got):\n%s\n%s", diff, view)
		}
	})
}

// repeatsFolded reports whether an object of the JSON document doc has two
// keys that are one of names without regard to case.
func repeatsFolded(doc []byte, names ...string) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		key    bool // the next token is a key
		seen   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.object && top.key {
			top.key = false
			for _, n := range names {
				if strings.EqualFold(k, n) {
					if top.seen[n] {
						return true
					}
					top.seen[n] = true
				}
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a key comes next
		}
	}
}
