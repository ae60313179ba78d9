package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Options tune Parse. The zero value reads the process environment and
// resolves relative file names against the current directory.
type Options struct {
	// LookupEnv returns the value of an environment variable and whether it
	// is set; nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// BaseDir is the directory that relative file names (password_file,
	// token_file, ca_file, cert_file, key_file, state.path, audit.path,
	// listen.tls.storage, inventory.key_file) are resolved against; empty
	// means the current directory. Load defaults it to the config file's
	// directory.
	BaseDir string
}

// Option changes the Options Load passes to Parse.
type Option func(*Options)

// WithLookupEnv makes Load read environment variables through lookup.
func WithLookupEnv(lookup func(name string) (string, bool)) Option {
	return func(o *Options) { o.LookupEnv = lookup }
}

// WithBaseDir makes Load resolve relative file names against dir instead of
// the config file's directory.
func WithBaseDir(dir string) Option {
	return func(o *Options) { o.BaseDir = dir }
}

// Load reads the configuration file at path and parses it with Parse. Relative
// file names in it are resolved against the file's directory unless
// WithBaseDir says otherwise.
//
// An error reading path itself is returned as is (an *fs.PathError); every
// problem with the contents comes back together as a *Problems.
func Load(path string, opts ...Option) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	o := Options{BaseDir: filepath.Dir(path)}
	for _, opt := range opts {
		opt(&o)
	}
	return Parse(data, o)
}

// Parse decodes, completes and validates one gateway.yaml document:
//
//  1. strict decoding: a key that names no field is a problem, reported
//     with its path and line;
//  2. ${NAME} references in every scalar are replaced by the environment
//     variable's value (see Options.LookupEnv);
//  3. defaults fill unset fields (see ApplyDefaults);
//  4. secrets are resolved: password_file is read, relative to
//     Options.BaseDir, with trailing newlines trimmed; relative ca_file,
//     cert_file and key_file names, state.path and audit.path are made
//     relative to Options.BaseDir too;
//  5. validation: the struct tags, then checks across fields.
//
// It returns the complete Config, or nil and a *Problems holding every
// problem found, in document order. Parse reads files but changes nothing.
func Parse(data []byte, opts Options) (*Config, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	probs := &Problems{}
	root, ok := parseYAML(data, probs)
	if !ok {
		return nil, probs
	}
	d := &decoder{lookupEnv: opts.LookupEnv, probs: probs, pos: map[string]position{"": {}}, budget: maxValues}
	var cfg Config
	if root != nil {
		d.pos[""] = position{root.Line, root.Column}
		d.decode(root, reflect.ValueOf(&cfg).Elem(), "")
		if d.budget < 0 {
			return nil, probs // checking the expansion would take as long
		}
	}
	cfg.ApplyDefaults()
	resolveSecrets(&cfg, opts.BaseDir, probs)
	validateTags(&cfg, probs)
	checkFields(&cfg, probs)
	if err := probs.err(); err != nil {
		probs.sortByPosition(d.pos)
		return nil, err
	}
	return &cfg, nil
}

// parseYAML parses data into a node tree, returning the document's root
// node (nil for an empty document) or recording a syntax problem and
// returning false.
func parseYAML(data []byte, probs *Problems) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		probs.addf("", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			probs.addf("", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		} else {
			probs.addf("", "line %d: a second YAML document; the file must hold one", extra.Line)
		}
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// Broker returns the broker named name, or nil if there is none. The
// pointer is into c.Brokers.
func (c *Config) Broker(name string) *Broker {
	for i := range c.Brokers {
		if c.Brokers[i].Name == name {
			return &c.Brokers[i]
		}
	}
	return nil
}

// Tenant returns the tenant named name, or nil if there is none. The
// pointer is into c.Tenants.
func (c *Config) Tenant(name string) *Tenant {
	for i := range c.Tenants {
		if c.Tenants[i].Name == name {
			return &c.Tenants[i]
		}
	}
	return nil
}

// TenantsReaching returns the names of the tenants with a route to
// broker, as the route's broker or its migrate_to, in configuration
// order, each once.
func (c *Config) TenantsReaching(broker string) []string {
	var out []string
	for _, t := range c.Tenants {
		for _, r := range t.Routes {
			if r.Broker == broker || r.MigrateTo == broker {
				out = append(out, t.Name)
				break
			}
		}
	}
	return out
}

// RouteCount returns the number of routes over all tenants.
func (c *Config) RouteCount() int {
	n := 0
	for _, t := range c.Tenants {
		n += len(t.Routes)
	}
	return n
}
