package rules

import (
	"net/url"
	"slices"
	"strings"
)

// schemaExternalRefs reports references that leave the schema document
// ("Schemas MUST NOT contain any external references"), which the compiler
// refuses to load. It resolves references and ids as the compiler does: a
// reference is local when it names the document (a "#..." pointer or
// anchor) or a resource embedded in it with an id, such as "item.json"
// below an object with "$id": "item.json". References to json-schema.org
// are schemaMetaRefs' and the compiler's to judge.
//
// The scan leaves to the compiler what it cannot tell for certain: a schema
// whose "$schema" names an unknown draft (the compiler stops there), ids and
// references that do not parse, and a root "$schema" of a vocabulary.
func schemaExternalRefs(sc *schemaScan) []schemaProblem {
	draft, ok := scanDraft(sc)
	if !ok || len(sc.nodes) == 0 {
		return nil
	}
	bases, ignored, resources := scanResources(sc, draft)
	var refs []string
	for n, node := range sc.nodes {
		if ignored[n] || node.kind != objSchema {
			continue
		}
		for r, ref := range node.refs {
			if !ref.str || draft.version < refSince[r] {
				continue
			}
			u, err := joinURL(bases[n], ref.val)
			if err != nil || isMetaURL(u) || slices.Contains(resources, u) {
				continue
			}
			refs = append(refs, trimBase(u))
		}
	}
	slices.Sort(refs)
	refs = slices.Compact(refs)
	ps := make([]schemaProblem, 0, len(refs))
	for _, r := range refs {
		ps = append(ps, externalRefProblem(r))
	}
	return ps
}

// scanDraft returns the draft the compiler compiles a schema as: draft-04
// when "$schema" is absent (or not a string, which fails the metaschema),
// and false when it names a draft the gateway does not know.
func scanDraft(sc *schemaScan) (schemaDraft, bool) {
	if !sc.schema.str {
		return schemaDrafts[0], true
	}
	u, _, _ := strings.Cut(sc.schema.val, "#")
	return lookupSchemaDraft(u)
}

// scanResources resolves the ids of the scanned nodes. It returns each
// node's base URL, whether the compiler ignores the references in it, and
// the URLs of the document and the resources embedded in it.
//
// Before draft 2019-09, "All other properties in a "$ref" object MUST be
// ignored": an object with "$ref" has no id, and nothing beside the "$ref"
// is compiled (the compiler still collects the ids there).
func scanResources(sc *schemaScan, draft schemaDraft) (bases []string, ignored []bool, resources []string) {
	idKey := idDollar
	if draft.version < 6 {
		idKey = idDraft4
	}
	bases, ignored, resources = make([]string, len(sc.nodes)), make([]bool, len(sc.nodes)), []string{schemaURL}
	for n, node := range sc.nodes {
		base := schemaURL
		if p := node.parent; p >= 0 {
			base = bases[p]
			ignored[n] = ignored[p] || draft.version < 2019 && sc.nodes[p].refs[0].str
		}
		hasRef := draft.version < 2019 && node.refs[0].set
		if id := node.ids[idKey]; node.kind == objSchema && id.str && !hasRef {
			if doc, _, _ := strings.Cut(id.val, "#"); doc != "" {
				if u, err := joinURL(base, doc); err == nil {
					base = u
					resources = append(resources, u)
				}
			}
		}
		bases[n] = base
	}
	return bases, ignored, resources
}

// joinURL resolves ref against base as the compiler does, and returns the
// URL without its fragment.
func joinURL(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	ref, _, _ = strings.Cut(ref, "#")
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u := b.ResolveReference(r)
	if !r.IsAbs() && b.Opaque != "" {
		u.Opaque = b.Opaque // golang.org/issue/66084
	}
	return u.String(), nil
}
