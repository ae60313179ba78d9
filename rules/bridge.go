package rules

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// contextSince is the version that added context to provision and update
// (and, from 2.13, bind): a broker whose newest version is older reads the
// platform's organization, space and app from the fields that came before.
var contextSince = v2_12

// bridgeCopy is one value Bridge copies into a request body for an older
// broker: from the member from of the object at path fromObj, to the
// member to of the object at path toObj ("" is the body itself).
type bridgeCopy struct {
	on           Endpoint
	fromObj      string
	from         string
	toObj, to    string
	toObjCreated bool // toObj is created when absent
}

// bridgeCopies is the table of what a broker older than 2.12 needs:
//
//   - provision: organization_guid and space_guid at the top level, from the
//     Cloud Foundry context object (context.organization_guid and
//     context.space_guid, the profile's names);
//   - update: previous_values.organization_id and previous_values.space_id,
//     which is where update bodies carried the org and space before context
//     (they never had them at the top level); previous_values is created if
//     absent;
//   - bind: the top-level app_guid, from bind_resource.app_guid (2.8).
var bridgeCopies = [...]bridgeCopy{
	{on: Provision, fromObj: "context", from: "organization_guid", to: "organization_guid"},
	{on: Provision, fromObj: "context", from: "space_guid", to: "space_guid"},
	{on: Update, fromObj: "context", from: "organization_guid", toObj: "previous_values", to: "organization_id", toObjCreated: true},
	{on: Update, fromObj: "context", from: "space_guid", toObj: "previous_values", to: "space_id", toObjCreated: true},
	{on: Bind, fromObj: "bind_resource", from: "app_guid", to: "app_guid"},
}

// Bridge adapts a provision, update or bind body from a platform speaking
// v for a broker whose newest API version is brokerMax:
//
//   - A broker older than 2.12 knows no context, so the org and space GUIDs
//     a platform sends only in context (and the app GUID it sends only in
//     bind_resource) are copied to where that broker reads them; see
//     bridgeCopies. A value is copied only when it is a non-empty string and
//     the target is absent or null; nothing is ever overwritten.
//   - The body members the predated table drops for the call (a bind's
//     predecessor_binding_id for a broker older than 2.17, when v has it;
//     see PredatedRules) are removed, every occurrence.
//
// Other fields the broker does not know stay as they are.
//
// When nothing needs changing, Bridge returns body itself and false, and
// reads nothing of it when no copy or drop can apply. Otherwise it returns a
// new body in which every other byte of the original is kept, member order
// and formatting included: copied values are inserted as members after the
// last member of their object that stays (or replace a null), each the
// source's JSON string token, escapes and all; a dropped member goes with
// the comma that separated it from its neighbour.
//
// The zero brokerMax counts as older than 2.12: adding the fields is
// harmless to a broker that knows context.
//
// A body that is not a JSON object cannot be bridged: Bridge returns it
// unchanged with a 400 *osb.Error, so that a gateway that only reports
// violations can still forward it.
func Bridge(c Call, body []byte, v, brokerMax osb.Version) (newBody []byte, changed bool, err error) {
	switch c.Endpoint {
	case Provision, Update, Bind:
	default:
		return body, false, nil
	}
	copies := brokerMax.Less(contextSince)
	drops := ForwardingFor(c, v, brokerMax).bodyDrops()
	if !copies && len(drops) == 0 {
		return body, false, nil
	}
	open := jsonfast.SkipSpace(body, 0)
	if !jsonfast.Valid(body) || open >= len(body) || body[open] != '{' {
		return body, false, badRequest("the %s body is not a JSON object, so it cannot be bridged for a broker of API version %s",
			c.Endpoint, brokerMax)
	}
	top, _ := parseObject(body, open)
	b := bridgeBuild{top: top, dropped: dropMembers(body, top, drops)}
	if copies {
		b.copyAll(c.Endpoint, body)
	}
	edits := b.edits()
	if len(edits) == 0 {
		return body, false, nil
	}
	return applyEdits(body, edits), true, nil
}

// copyAll sets the bridgeCopies of endpoint e that body's values call for.
func (b *bridgeBuild) copyAll(e Endpoint, body []byte) {
	top := b.top
	for i := range bridgeCopies {
		bc := &bridgeCopies[i]
		if bc.on != e {
			continue
		}
		value := top.stringIn(body, bc.fromObj, bc.from)
		if value == nil {
			continue
		}
		if bc.toObj == "" {
			b.set(body, top, bc.to, value)
			continue
		}
		m, ok := top.last(body, bc.toObj)
		switch {
		case !ok || isNull(body[m.ValStart:m.ValEnd]):
			if bc.toObjCreated {
				b.create(bc.toObj, bc.to, value)
			}
		case body[m.ValStart] == '{':
			obj, _ := parseObject(body, m.ValStart)
			b.set(body, obj, bc.to, value)
		}
	}
	for _, cr := range b.created {
		b.set(body, top, cr.name, append(append([]byte{'{'}, cr.members...), '}'))
	}
}

// dropMembers marks the members of top named one of keys; nil when none
// is.
func dropMembers(body []byte, top bridgeObject, keys []string) []bool {
	var dropped []bool
	for i, m := range top.members {
		for _, k := range keys {
			if m.Is(body, k) {
				if dropped == nil {
					dropped = make([]bool, len(top.members))
				}
				dropped[i] = true
			}
		}
	}
	return dropped
}

// bridgeBuild collects the changes Bridge makes to one body: members to
// insert per object, nulls to replace, and objects to create.
type bridgeBuild struct {
	top      bridgeObject
	dropped  []bool // by index of top's members; nil: none
	inserts  []bridgeInsert
	replaces []bridgeEdit
	created  []bridgeInsert // name: the new object's member name
}

// bridgeInsert is the members to add to one object, as `"k":v,"k2":v2`.
type bridgeInsert struct {
	obj     bridgeObject
	name    string
	members []byte
}

// set gives member key of obj the value: inserted when absent, replacing a
// null, and left alone when it has a value.
func (b *bridgeBuild) set(body []byte, obj bridgeObject, key string, value []byte) {
	if m, ok := obj.last(body, key); ok {
		if isNull(body[m.ValStart:m.ValEnd]) {
			b.replaces = append(b.replaces, bridgeEdit{at: m.ValStart, del: m.ValEnd - m.ValStart, insert: value})
		}
		return
	}
	for i := range b.inserts {
		if b.inserts[i].obj.closing == obj.closing {
			b.inserts[i].members = appendMember(b.inserts[i].members, key, value)
			return
		}
	}
	b.inserts = append(b.inserts, bridgeInsert{obj: obj, members: appendMember(nil, key, value)})
}

// create adds member key to the object name that Bridge creates.
func (b *bridgeBuild) create(name, key string, value []byte) {
	for i := range b.created {
		if b.created[i].name == name {
			b.created[i].members = appendMember(b.created[i].members, key, value)
			return
		}
	}
	b.created = append(b.created, bridgeInsert{name: name, members: appendMember(nil, key, value)})
}

// edits returns the build as edits of the body.
func (b *bridgeBuild) edits() []bridgeEdit {
	edits := slices.Clone(b.replaces)
	for _, in := range b.inserts {
		at, ins := in.obj.closing, []byte(nil)
		if last, ok := b.lastKept(in.obj); ok {
			at, ins = last.ValEnd, []byte{','}
		}
		edits = append(edits, bridgeEdit{at: at, insert: append(ins, in.members...)})
	}
	return append(edits, b.drops()...)
}

// lastKept returns the last member of obj that is not dropped.
func (b *bridgeBuild) lastKept(obj bridgeObject) (jsonfast.Member, bool) {
	for i := len(obj.members) - 1; i >= 0; i-- {
		if obj.closing != b.top.closing || b.dropped == nil || !b.dropped[i] {
			return obj.members[i], true
		}
	}
	return jsonfast.Member{}, false
}

// drops returns the deletions of the dropped members of top. A member
// after one that stays goes with the comma before it; one of the members
// that open the object, with the comma after it (the last one standing
// alone, with none).
func (b *bridgeBuild) drops() []bridgeEdit {
	var edits []bridgeEdit
	ms, kept := b.top.members, false
	for i, m := range ms {
		switch {
		case b.dropped == nil || !b.dropped[i]:
			kept = true
			continue
		case kept:
			edits = append(edits, bridgeEdit{at: ms[i-1].ValEnd, del: m.ValEnd - ms[i-1].ValEnd})
		case i+1 < len(ms):
			edits = append(edits, bridgeEdit{at: m.KeyStart, del: ms[i+1].KeyStart - m.KeyStart})
		default:
			edits = append(edits, bridgeEdit{at: m.KeyStart, del: m.ValEnd - m.KeyStart})
		}
	}
	return edits
}

// bridgeObject is a parsed JSON object of a body.
type bridgeObject struct {
	members jsonfast.Object
	closing int // offset of the closing brace
}

// parseObject parses the object whose "{" is at body[open].
func parseObject(body []byte, open int) (bridgeObject, bool) {
	ms, closing, ok := jsonfast.ObjectMembers(body, open)
	return bridgeObject{members: ms, closing: closing}, ok
}

// last returns the last member named key: the one encoding/json reads.
func (o bridgeObject) last(body []byte, key string) (jsonfast.Member, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].Is(body, key) {
			return o.members[i], true
		}
	}
	return jsonfast.Member{}, false
}

// stringIn returns the JSON string token of member key of the object
// member obj, when it is a non-empty string.
func (o bridgeObject) stringIn(body []byte, obj, key string) []byte {
	m, ok := o.last(body, obj)
	if !ok || body[m.ValStart] != '{' {
		return nil
	}
	inner, ok := parseObject(body, m.ValStart)
	if !ok {
		return nil
	}
	v, ok := inner.last(body, key)
	if !ok {
		return nil
	}
	raw := body[v.ValStart:v.ValEnd]
	if typeOf(raw) != typeString || string(raw) == `""` {
		return nil
	}
	return raw
}

// bridgeEdit replaces body[at:at+del] with insert.
type bridgeEdit struct {
	at, del int
	insert  []byte
}

// appendMember appends "key":value to b, after a comma when b already
// holds a member.
func appendMember(b []byte, key string, value []byte) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	k, _ := json.Marshal(key)
	b = append(b, k...)
	b = append(b, ':')
	return append(b, value...)
}

// applyEdits applies edits, which do not overlap, to a copy of body. Of
// edits at the same offset, insertions come before a deletion and
// otherwise keep their order.
func applyEdits(body []byte, edits []bridgeEdit) []byte {
	slices.SortStableFunc(edits, func(a, b bridgeEdit) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return a.del - b.del
	})
	var out bytes.Buffer
	out.Grow(len(body) + 128)
	pos := 0
	for _, e := range edits {
		out.Write(body[pos:e.at])
		out.Write(e.insert)
		pos = e.at + e.del
	}
	out.Write(body[pos:])
	return out.Bytes()
}
