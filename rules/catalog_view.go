package rules

import (
	"errors"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// View returns the catalog body the Index was built from without the
// services showService hides and the plans showPlan hides; a service left
// with no plan goes too. Every other byte is the broker's, as it wrote
// them (spacing, field order, fields the gateway does not know): with
// nothing hidden, View returns the body itself. The body is not decoded
// again: View finds the services and plans by the offsets it located, once,
// in the body the Index decoded.
//
// The error is for a body whose arrays do not match what the Index
// decoded, which a body NewIndex accepted does not have.
func (ix *Index) View(showService func(*osb.Service) bool, showPlan func(*osb.Service, *osb.Plan) bool) ([]byte, error) {
	sp, err := ix.catalogSpans()
	if err != nil {
		return nil, err
	}
	services := ix.catalog.Services
	keepPlans := make([][]bool, len(services))
	changed := false
	for i := range services {
		s := &services[i]
		if !showService(s) {
			changed = true
			continue
		}
		keep, n := make([]bool, len(s.Plans)), 0
		for j := range s.Plans {
			if keep[j] = showPlan(s, &s.Plans[j]); keep[j] {
				n++
			}
		}
		if n < len(s.Plans) || n == 0 {
			changed = true
		}
		if n > 0 {
			keepPlans[i] = keep
		}
	}
	if !changed {
		return ix.body, nil
	}
	body := ix.body
	out := make([]byte, 0, len(body))
	out = append(out, body[:sp.services.open]...)
	out = sp.services.appendKept(out, body, func(i int) bool { return keepPlans[i] != nil }, func(out []byte, i int) []byte {
		el, plans := sp.services.elems[i], sp.plans[i]
		out = append(out, body[el.Start:plans.open]...)
		out = plans.appendKept(out, body, func(j int) bool { return keepPlans[i][j] }, nil)
		return append(out, body[plans.close+1:el.End]...)
	})
	return append(out, body[sp.services.close+1:]...), nil
}

// catalogSpans locates, in the body an Index was built from, the services
// array and each service's plans array.
type catalogSpans struct {
	services jsonArray
	plans    []jsonArray // by service
}

// jsonArray is a JSON array of a document, as byte offsets.
type jsonArray struct {
	open, close int // the offsets of "[" and "]"
	elems       []jsonfast.Span
}

// appendKept appends a to out with only the elements keep reports, each
// written by elem (nil: as it is). The separators and spacing that precede
// each element kept, and those around the first and last, are the
// document's.
func (a jsonArray) appendKept(out, doc []byte, keep func(int) bool, elem func([]byte, int) []byte) []byte {
	if len(a.elems) == 0 {
		return append(out, doc[a.open:a.close+1]...)
	}
	out = append(out, doc[a.open:a.elems[0].Start]...)
	first := true
	for i, el := range a.elems {
		if !keep(i) {
			continue
		}
		if !first {
			out = append(out, doc[a.elems[i-1].End:el.Start]...)
		}
		first = false
		if elem == nil {
			out = append(out, doc[el.Start:el.End]...)
		} else {
			out = elem(out, i)
		}
	}
	return append(out, doc[a.elems[len(a.elems)-1].End:a.close+1]...)
}

// errCatalogSpans is a body whose arrays do not match its Index: one that
// sends "services" or "plans" twice, in different case, which
// encoding/json merges.
var errCatalogSpans = errors.New(`the catalog's services or plans are not where decoding found them ("services" or "plans" sent twice, in different case?)`)

// catalogSpans returns the spans of ix's body, located on first use.
func (ix *Index) catalogSpans() (*catalogSpans, error) {
	ix.spansOnce.Do(func() { ix.spans, ix.spansErr = locateCatalog(ix.body, &ix.catalog) })
	return ix.spans, ix.spansErr
}

// locateCatalog finds the services and plans arrays of body, a valid JSON
// catalog that decoded into cat, by its keys as encoding/json matched them
// (without regard to case, the last of several winning). A catalog
// without a services array gets an empty one at the end of the body.
func locateCatalog(body []byte, cat *osb.Catalog) (*catalogSpans, error) {
	top, ok := objectAt(body, jsonfast.SkipSpace(body, 0))
	if !ok {
		return nil, errCatalogSpans
	}
	sp := &catalogSpans{}
	services, ok := arrayAt(body, top, "services")
	if !ok {
		if len(cat.Services) > 0 {
			return nil, errCatalogSpans
		}
		sp.services = jsonArray{open: len(body), close: len(body) - 1}
		return sp, nil
	}
	sp.services = services
	if len(services.elems) != len(cat.Services) {
		return nil, fmt.Errorf("%w: %d services, %d decoded", errCatalogSpans, len(services.elems), len(cat.Services))
	}
	sp.plans = make([]jsonArray, len(services.elems))
	for i, el := range services.elems {
		plans := jsonArray{open: el.End, close: el.End - 1} // none: an empty array after the service
		if svc, ok := objectAt(body, el.Start); ok {
			if a, ok := arrayAt(body, svc, "plans"); ok {
				plans = a
			}
		}
		if len(plans.elems) != len(cat.Services[i].Plans) {
			return nil, fmt.Errorf("%w: service %d: %d plans, %d decoded", errCatalogSpans, i, len(plans.elems), len(cat.Services[i].Plans))
		}
		sp.plans[i] = plans
	}
	return sp, nil
}

// objectAt returns the members of the object at doc[open], if it is one.
func objectAt(doc []byte, open int) (jsonfast.Object, bool) {
	if open >= len(doc) || doc[open] != '{' {
		return nil, false
	}
	ms, _, ok := jsonfast.ObjectMembers(doc, open)
	return ms, ok
}

// arrayAt returns the elements of the array that is the value of the
// member of ms named name (see jsonfast.Object.LastFold), if it is an
// array.
func arrayAt(doc []byte, ms jsonfast.Object, name string) (jsonArray, bool) {
	m, ok := ms.LastFold(doc, name)
	if !ok || doc[m.ValStart] != '[' {
		return jsonArray{}, false
	}
	elems, closing, ok := jsonfast.ArrayElements(doc, m.ValStart)
	return jsonArray{open: m.ValStart, close: closing, elems: elems}, ok
}
