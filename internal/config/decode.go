package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// decoder fills a Go value from a yaml.Node tree, strictly: a key that names
// no field, a duplicate key, or a value of the wrong shape is a problem, and
// decoding goes on so that every problem in the file is reported at once.
// Every scalar has its ${NAME} references expanded before it is converted.
type decoder struct {
	lookupEnv func(string) (string, bool)
	probs     *Problems
	pos       map[string]position // YAML path → where its value is written
	budget    int                 // values left to decode; aliases can multiply them
}

// maxValues bounds the values one file may decode to, so that nested
// aliases ("billion laughs") cannot expand without end.
const maxValues = 1 << 17

var (
	durationType        = reflect.TypeFor[time.Duration]()
	versionType         = reflect.TypeFor[osb.Version]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decode stores n into v, which must be settable; path names v in messages.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.probs.addf(path, "the file expands to more than %d values (too many aliases?) (line %d)", maxValues, n.Line)
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // an empty value leaves the zero value, which defaults fill
	}
	if v.Type() == retiredType {
		d.retired(n, v, path)
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshalerType) {
		d.scalar(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.Map, reflect.Interface:
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.probs.addf(path, "cannot be decoded (line %d)", n.Line)
		}
	default:
		d.scalar(n, v, path)
	}
}

// mapping decodes a YAML mapping into struct v, matching keys to the
// fields' yaml tags.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.probs.addf(path, "must be a mapping of keys to values, not %s (line %d)", kindName(n), n.Line)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if isMergeKey(n.Content[i]) {
			d.merge(n.Content[i+1], v, path)
		}
	}
	fields := yamlFields(v.Type())
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if isMergeKey(key) {
			continue
		}
		name := key.Value
		keyPath := joinKey(path, name)
		if first, dup := seen[name]; dup {
			d.probs.addf(keyPath, "duplicate key (line %d, first on line %d)", key.Line, first)
			continue
		}
		seen[name] = key.Line
		idx, ok := fields[name]
		if key.Kind != yaml.ScalarNode || !ok {
			d.pos[keyPath] = position{key.Line, key.Column}
			d.probs.addf(keyPath, "unknown key (line %d)", key.Line)
			continue
		}
		d.pos[keyPath] = position{key.Line, key.Column}
		d.decode(val, v.Field(idx), keyPath)
	}
}

// isMergeKey reports whether key is the YAML merge key "<<".
func isMergeKey(key *yaml.Node) bool {
	return key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge"
}

// merge applies a YAML merge key ("<<: *anchor"): the anchored mapping, or
// each of a sequence of them, is decoded before the other keys so that the
// keys written beside the merge key override it.
func (d *decoder) merge(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.SequenceNode {
		for _, m := range n.Content {
			d.merge(m, v, path)
		}
		return
	}
	d.mapping(n, v, path)
}

// sequence decodes a YAML sequence into slice v.
func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.probs.addf(path, "must be a list, not %s (line %d)", kindName(n), n.Line)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		itemPath := joinIndex(path, i)
		d.pos[itemPath] = position{item.Line, item.Column}
		d.decode(item, s.Index(i), itemPath)
	}
	v.Set(s)
}

// scalar expands the ${NAME} references in a scalar and converts it to v's
// type. Messages never repeat the value: it may be a secret.
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.probs.addf(path, "must be a single value, not %s (line %d)", kindName(n), n.Line)
		return
	}
	s, err := expandEnv(n.Value, d.lookupEnv)
	if err != nil {
		d.probs.addf(path, "%v (line %d)", err, n.Line)
		return
	}
	if msg := setScalar(v, s); msg != "" {
		d.probs.addf(path, "%s (line %d)", msg, n.Line)
	}
}

// setScalar converts s to v's type and stores it; it returns a message
// saying what was expected when s does not convert.
func setScalar(v reflect.Value, s string) string {
	switch {
	case v.Type() == versionType:
		ver, err := osb.ParseVersion(s)
		if err != nil {
			return "must be an API version MAJOR.MINOR such as 2.15"
		}
		v.Set(reflect.ValueOf(ver))
		return ""
	case reflect.PointerTo(v.Type()).Implements(textUnmarshalerType):
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return "has an invalid value"
		}
		return ""
	case v.Type() == durationType:
		dur, err := time.ParseDuration(s)
		if err != nil {
			return `must be a duration such as "90s" or "1m30s"`
		}
		v.SetInt(int64(dur))
		return ""
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, ok := parseBool(s)
		if !ok {
			return "must be true or false"
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, v.Type().Bits())
		if err != nil {
			return "must be a whole number"
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, v.Type().Bits())
		if err != nil {
			return "must be a whole number, 0 or more"
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return "must be a number"
		}
		v.SetFloat(f)
	default:
		return "cannot be set from a single value"
	}
	return ""
}

// parseBool accepts the YAML 1.2 core schema booleans.
func parseBool(s string) (value, ok bool) {
	switch s {
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

// yamlFields maps the yaml key of each exported field of struct type t to
// the field's index. A field without a yaml tag uses its lowercased name, as
// yaml.v3 does; `yaml:"-"` hides a field.
func yamlFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name, ok := yamlKey(t.Field(i)); ok {
			fields[name] = i
		}
	}
	return fields
}

// yamlKey is the yaml key of struct field f, as yaml.v3 reads it: its
// yaml tag's name, else its lowercased name; false for an unexported
// field or one tagged `yaml:"-"`.
func yamlKey(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return "", false
	case "":
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// kindName names what n is, for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

// expandEnv replaces each ${NAME} in s with the value of the environment
// variable NAME, looked up with lookup. A "$" not followed by "{" is kept as
// written, so bcrypt hashes ("$2a$10$…") pass through untouched. NAME is a
// letter or "_" followed by letters, digits and "_". A variable that is set
// to the empty string expands to the empty string; one that is not set is
// an error naming it. The error never contains s, which may be a secret.
//
// There is no escape for a literal "${": put such a value in a file and
// name it with password_file, whose contents are not expanded.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var missing []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", errors.New(`has "${" without a closing "}"`)
		}
		name := s[i+2 : i+2+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} does not name an environment variable (letters, digits and _, not starting with a digit)", name)
		}
		if val, ok := lookup(name); ok {
			b.WriteString(val)
		} else {
			missing = append(missing, name)
		}
		s = s[i+2+end+1:]
	}
	switch len(missing) {
	case 0:
		return b.String(), nil
	case 1:
		return "", fmt.Errorf("environment variable %s is not set", missing[0])
	default:
		return "", fmt.Errorf("environment variables %s are not set", strings.Join(missing, ", "))
	}
}

// validEnvName reports whether name is a portable environment variable
// name: [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
