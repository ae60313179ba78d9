package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// uniqueScope says where a field's values must not repeat.
type uniqueScope uint8

const (
	mayRepeat       uniqueScope = iota
	uniqueInCatalog             // across the whole catalog
	uniqueInService             // among the plans of one service
)

// lintTextRule is the row of a string field of a service, plan or maintenance
// info: whether it is required, how long it may be, which characters it
// should use, and where its values must be unique.
type lintTextRule[T any] struct {
	field    string
	get      func(*T) string
	required bool // a MUST "be a non-empty string"
	// soft is the length in characters above which a Warning is reported:
	// the specification recommends strings of at most 255 characters.
	soft int
	// hard is the length above which an Error is reported: what Cloud
	// Controller refuses or cannot store. Zero means no limit.
	hard    int
	hardWhy string
	// charset reports a character the value should not use, if any.
	charset func(string) (rune, string, bool)
	unique  uniqueScope
}

// Cloud Controller's limits beyond the specification's.
const (
	ccColumn      = 255 // ids and names are varchar(255) columns
	ccDescription = 10000
	ccTags        = 2048 // all tags of a service together
	specMaxChars  = 255  // "RECOMMENDED that strings do not exceed 255 characters"
)

const ccColumnWhy = "Cloud Controller stores at most 255"

// lintServiceTexts are the string fields of a service offering.
var lintServiceTexts = []lintTextRule[osb.Service]{
	{field: "id", get: func(s *osb.Service) string { return s.ID }, required: true,
		hard: ccColumn, hardWhy: ccColumnWhy, charset: unreservedID, unique: uniqueInCatalog},
	{field: "name", get: func(s *osb.Service) string { return s.Name }, required: true,
		hard: ccColumn, hardWhy: ccColumnWhy, charset: cliFriendly, unique: uniqueInCatalog},
	{field: "description", get: func(s *osb.Service) string { return s.Description }, required: true,
		soft: specMaxChars, hard: ccDescription, hardWhy: "Cloud Controller accepts at most 10000"},
}

// lintPlanTexts are the string fields of a plan. Plan ids are unique across the
// catalog ("MUST be globally unique"; Cloud Controller refuses duplicates
// across services), plan names within their service.
var lintPlanTexts = []lintTextRule[osb.Plan]{
	{field: "id", get: func(p *osb.Plan) string { return p.ID }, required: true,
		hard: ccColumn, hardWhy: ccColumnWhy, charset: unreservedID, unique: uniqueInCatalog},
	{field: "name", get: func(p *osb.Plan) string { return p.Name }, required: true,
		hard: ccColumn, hardWhy: ccColumnWhy, charset: cliFriendly, unique: uniqueInService},
	{field: "description", get: func(p *osb.Plan) string { return p.Description }, required: true,
		soft: specMaxChars},
}

// lintMaintenanceTexts are the string fields of a plan's maintenance_info.
var lintMaintenanceTexts = []lintTextRule[osb.MaintenanceInfo]{
	{field: "version", get: func(m *osb.MaintenanceInfo) string { return m.Version }, required: true},
	{field: "description", get: func(m *osb.MaintenanceInfo) string { return m.Description }, soft: specMaxChars},
}

// lintTexts applies rules to v, which lives at path at. noun ("service",
// "plan") and scopeAt (the enclosing service's path) key the uniqueness
// scopes.
func lintTexts[T any](l *linter, at, noun, scopeAt string, rules []lintTextRule[T], v *T) {
	for _, r := range rules {
		path := at + "." + r.field
		s := r.get(v)
		if strings.TrimSpace(s) == "" {
			if r.required {
				l.add(path, SeverityError, "missing or blank; the specification requires a non-empty string")
			}
			continue
		}
		switch n := utf8.RuneCountInString(s); {
		case r.hard > 0 && n > r.hard:
			l.add(path, SeverityError, "%d characters; %s", n, r.hardWhy)
		case r.soft > 0 && n > r.soft:
			l.add(path, SeverityWarning, "%d characters; the specification recommends at most %d", n, r.soft)
		}
		if r.charset != nil {
			if c, what, bad := r.charset(s); bad {
				l.add(path, SeverityWarning, "%s contains %q: %s", lintQuote(s), c, what)
			}
		}
		if r.unique != mayRepeat {
			key := noun + "." + r.field
			if r.unique == uniqueInService {
				key += "@" + scopeAt
			}
			l.unique(key, s, path, noun+" "+r.field)
		}
	}
}

// unique reports value if it was met before in the scope key.
func (l *linter) unique(key, value, path, what string) {
	seen := l.seen[key]
	if seen == nil {
		seen = map[string]string{}
		l.seen[key] = seen
	}
	if first, dup := seen[value]; dup {
		l.add(path, SeverityError, "%s is also the %s at %s; the specification requires unique values", lintQuote(value), what, first)
		return
	}
	seen[value] = path
}

// cliFriendly reports a character outside the specification's CLI-friendly
// set, "alphanumeric characters, periods, and hyphens, with no spaces"
// (OSB 2.14 and later; earlier versions asked for lower case only).
func cliFriendly(s string) (rune, string, bool) {
	for _, c := range s {
		if !isAlnumASCII(c) && c != '.' && c != '-' {
			return c, "a CLI-friendly name uses only letters, digits, periods and hyphens", true
		}
	}
	return 0, "", false
}

// unreservedID reports a character outside RFC 3986's unreserved set, which
// the specification recommends for ids because they appear in URLs.
func unreservedID(s string) (rune, string, bool) {
	for _, c := range s {
		if !isAlnumASCII(c) && !strings.ContainsRune("-._~", c) {
			return c, "ids appear in URLs and should use only letters, digits and -._~ (RFC 3986 unreserved characters)", true
		}
	}
	return 0, "", false
}

func isAlnumASCII(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// lintQuote quotes a value for a message, cut after 64 characters.
func lintQuote(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", string([]rune(s)[:max]))
}

// Permissions a service may list in "requires".
const (
	// RequireSyslogDrain lets bindings return syslog_drain_url.
	RequireSyslogDrain = "syslog_drain"
	// RequireRouteForwarding makes the service a route service: bindings may
	// return route_service_url.
	RequireRouteForwarding = "route_forwarding"
	// RequireVolumeMount lets bindings return volume_mounts.
	RequireVolumeMount = "volume_mount"
)

// requiresPermissions are the values "requires" may hold.
var requiresPermissions = []string{RequireSyslogDrain, RequireRouteForwarding, RequireVolumeMount}

// lintServiceRules are the checks on a service beyond its string fields.
var lintServiceRules = []func(l *linter, at string, ws *wireService){
	// "bindable*": required; Cloud Controller refuses a service without it.
	func(l *linter, at string, ws *wireService) {
		if ws.Bindable == nil {
			l.add(at+".bindable", SeverityError, "missing; the specification requires true or false")
		}
	},
	// "tags": Cloud Controller refuses more than 2048 characters of tags.
	func(l *linter, at string, ws *wireService) {
		n := 0
		for _, t := range ws.Tags {
			n += utf8.RuneCountInString(t)
		}
		if n > ccTags {
			l.add(at+".tags", SeverityError, "%d characters in all; Cloud Controller accepts at most %d", n, ccTags)
		}
	},
	// "requires": only the permissions the specification defines.
	func(l *linter, at string, ws *wireService) {
		for k, r := range ws.Requires {
			if !slices.Contains(requiresPermissions, r) {
				l.add(fmt.Sprintf("%s.requires[%d]", at, k), SeverityError,
					"%s is not a permission the specification defines (%s); Cloud Controller refuses the catalog",
					lintQuote(r), strings.Join(requiresPermissions, ", "))
			}
		}
	},
	func(l *linter, at string, ws *wireService) { checkJSONObject(l, at+".metadata", ws.Metadata) },
	// "plans*": "MUST contain at least one Service Plan".
	func(l *linter, at string, ws *wireService) {
		if len(ws.Plans) == 0 {
			l.add(at+".plans", SeverityError, "a service must have at least one plan")
		}
	},
}

// lintPlanRules are the checks on a plan beyond its string fields and schemas.
var lintPlanRules = []func(l *linter, at string, s *osb.Service, p *osb.Plan){
	func(l *linter, at string, _ *osb.Service, p *osb.Plan) {
		checkJSONObject(l, at+".metadata", p.Metadata)
	},
	// maximum_polling_duration: a duration in seconds.
	func(l *linter, at string, _ *osb.Service, p *osb.Plan) {
		if d := p.MaximumPollingDuration; d != nil && *d <= 0 {
			l.add(at+".maximum_polling_duration", SeverityError, "must be a positive number of seconds, got %d", *d)
		}
	},
	// maintenance_info: "version*" MUST be a semantic version.
	func(l *linter, at string, _ *osb.Service, p *osb.Plan) {
		m := p.MaintenanceInfo
		if m == nil {
			return
		}
		lintTexts(l, at+".maintenance_info", "maintenance_info", at, lintMaintenanceTexts, m)
		if m.Version != "" && !semverPattern.MatchString(m.Version) {
			l.add(at+".maintenance_info.version", SeverityError, "%s is not a semantic version (semver 2.0.0, such as 1.2.3)", lintQuote(m.Version))
		}
	},
	// schemas.service_binding is "used only if the Service Plan is bindable".
	func(l *linter, at string, s *osb.Service, p *osb.Plan) {
		if rawSchema(p, BindingCreate) != nil && !osb.PlanBindable(s, p) {
			l.add(at+".schemas.service_binding", SeverityWarning, "the plan is not bindable, so no platform uses this schema")
		}
	},
}

// checkJSONObject reports metadata that is present but not a JSON object.
func checkJSONObject(l *linter, path string, raw json.RawMessage) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] == '{' {
		return
	}
	l.add(path, SeverityError, "must be a JSON object")
}

// semverPattern is the regular expression semver.org gives for a version string.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
