package routes

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// A call on a route with ids, mapped back to the broker's ids: in the
// path, the query and the body; an id the route never showed is refused.

// idMiss is a service or plan id sent in another form than the route
// shows it (idMap.other): upper case, braces, urn:uuid:. It is refused,
// not mapped back: what the platform sent is not an id of the route's
// catalog, and the broker never made it either.
type idMiss struct {
	// field names where the id came: "service_id",
	// "previous_values.plan_id", "query parameter service_id".
	field     string
	got, want string
}

// refusal is the 400 a request carrying m gets, the same for an id in the
// query and in the body.
func (m *idMiss) refusal(s *core.Scope) error {
	return &osb.Error{Status: http.StatusBadRequest, Description: fmt.Sprintf(
		"%s must be %q, as the route of tenant %q to broker %q shows it, got %q: a route with ids of its own (routes[].ids) maps back only the ids its catalog shows, as it shows them (lower-case hex with hyphens, without braces or urn:uuid:)",
		m.field, m.want, s.Tenant, s.Broker, m.got)}
}

// mapBack returns r with the service and plan ids of its query and body
// mapped back to the broker's, and s's Call and Body to match (r itself
// when nothing changed; the inbound request is never modified). Ids t
// does not know pass unchanged; an id sent in another form than the
// route shows (idMiss) stops the mapping, and the call is refused.
func (t *IDTable) mapBack(r *http.Request, s *core.Scope) (*http.Request, *idMiss) {
	var r2 *http.Request
	q, changed, miss := t.MapQuery(r.URL.RawQuery, &s.Call)
	if miss != nil {
		return r, miss
	}
	if changed {
		r2 = new(http.Request)
		*r2 = *r
		u := *r.URL
		u.RawQuery = q
		r2.URL = &u
	}
	switch s.Call.Endpoint {
	case rules.Provision, rules.Update, rules.Bind:
		nb, changed, miss := t.MapBody(s.Body)
		if miss != nil {
			return r, miss
		}
		if changed {
			if r2 == nil {
				r2 = new(http.Request)
				*r2 = *r
			}
			r2.Body = io.NopCloser(bytes.NewReader(nb))
			r2.ContentLength = int64(len(nb))
			s.Body = nb
		}
	}
	if r2 == nil {
		return r, nil
	}
	return r2, nil
}

// MapQuery maps the service_id and plan_id parameters of a raw query
// (classified: no ";", no malformed escape, no repeated id parameter),
// every other byte as sent, and sets c's to match; c's ids are the
// decoded ones, so an id percent-encoded in any way is looked up as what
// it decodes to. It changes nothing when either id is an idMiss.
func (t *IDTable) MapQuery(raw string, c *rules.Call) (string, bool, *idMiss) {
	svc, okSvc := t.Services.back[c.ServiceID]
	plan, okPlan := t.Plans.back[c.PlanID]
	if !okSvc && c.ServiceID != "" {
		if want, near := t.Services.other(c.ServiceID); near {
			return raw, false, &idMiss{field: "query parameter service_id", got: c.ServiceID, want: want}
		}
	}
	if !okPlan && c.PlanID != "" {
		if want, near := t.Plans.other(c.PlanID); near {
			return raw, false, &idMiss{field: "query parameter plan_id", got: c.PlanID, want: want}
		}
	}
	if !okSvc && !okPlan {
		return raw, false, nil
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	for rest := raw; ; {
		p, more, found := strings.Cut(rest, "&")
		k, _, _ := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		switch {
		case err != nil:
			b.WriteString(p)
		case key == "service_id" && okSvc:
			b.WriteString(k + "=" + url.QueryEscape(svc))
		case key == "plan_id" && okPlan:
			b.WriteString(k + "=" + url.QueryEscape(plan))
		default:
			b.WriteString(p)
		}
		if !found {
			break
		}
		b.WriteByte('&')
		rest = more
	}
	if okSvc {
		c.ServiceID = svc
	}
	if okPlan {
		c.PlanID = plan
	}
	return b.String(), true, nil
}

// MapBody maps the service_id and plan_id of a request body, and those of
// its previous_values, every duplicate and case of their keys, every
// other byte as sent; an idMiss among them maps nothing. A body that is
// no JSON object passes unchanged (the validate stage refuses it).
func (t *IDTable) MapBody(doc []byte) ([]byte, bool, *idMiss) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return doc, false, nil
	}
	var sbuf [4]splice
	ss, miss := t.mapObject(doc, root, sbuf[:0], "")
	if miss != nil {
		return doc, false, miss
	}
	if len(ss) == 0 {
		return doc, false, nil
	}
	return spliced(doc, ss), true, nil
}

// mapObject appends to ss the splices that map the service_id and plan_id
// members of the object at doc[open] back, and, at the top (in == ""),
// those of its previous_values; in is the path of the object, for the
// idMiss it returns at the first id sent in another form.
func (t *IDTable) mapObject(doc []byte, open int, ss []splice, in string) ([]splice, *idMiss) {
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, open)
	for _, m := range ms {
		var table idMap
		var name string
		switch v := doc[m.ValStart]; {
		case v == '"' && m.IsFold(doc, "service_id"):
			table, name = t.Services, "service_id"
		case v == '"' && m.IsFold(doc, "plan_id"):
			table, name = t.Plans, "plan_id"
		case v == '{' && in == "" && m.IsFold(doc, "previous_values"):
			var miss *idMiss
			if ss, miss = t.mapObject(doc, m.ValStart, ss, "previous_values."); miss != nil {
				return ss, miss
			}
			continue
		default:
			continue
		}
		id := jsonfast.Unquote(doc[m.ValStart:m.ValEnd])
		if to, ok := table.back[id]; ok {
			ss = append(ss, splice{m.ValStart, m.ValEnd, to})
		} else if want, near := table.other(id); near {
			return ss, &idMiss{field: in + name, got: id, want: want}
		}
	}
	return ss, nil
}
