package rules

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// schemaKey identifies a parameter schema by the SHA-256 of its bytes as
// the broker sent them: equal bytes compile to equal schemas.
type schemaKey [sha256.Size]byte

// schemaResult is one distinct parameter schema: its compile-free problems,
// found when an index is built, and its compilation, done on first use.
// Indexes of successive catalog versions share it; it is safe for
// concurrent use.
type schemaResult struct {
	raw      json.RawMessage
	problems []schemaProblem // checkSchema's; immutable

	once            sync.Once
	compiled        *CompiledSchema // nil where the schema does not compile
	compileProblems []schemaProblem // the compiler's, beyond problems
}

// compile compiles the schema unless that was done, and returns r.
func (r *schemaResult) compile() *schemaResult {
	r.once.Do(func() { r.compiled, r.compileProblems = compileSchema(r.raw, r.problems) })
	return r
}

// schema compiles the schema on first use and returns it, nil when it does
// not compile. r may be nil (no schema).
func (r *schemaResult) schema() *CompiledSchema {
	if r == nil {
		return nil
	}
	return r.compile().compiled
}

// schemaSet holds a catalog's distinct parameter schemas and which plan uses
// which.
type schemaSet struct {
	results []*schemaResult
	// uses[i][j][k] is the index in results of plan j of service i's schema
	// of kind k, or -1 for none.
	uses [][][numSchemaKinds]int
	// byKey are the results by content.
	byKey map[schemaKey]*schemaResult
}

// result returns the schema of plan j of service i of kind k, or nil.
func (ss *schemaSet) result(i, j int, k SchemaKind) *schemaResult {
	if r := ss.uses[i][j][k]; r >= 0 {
		return ss.results[r]
	}
	return nil
}

// collectSchemas gathers the distinct parameter schemas of the catalog and
// runs the compile-free checks on them, taking those found in reuse (a
// previous version's results) as they are. It compiles nothing.
func collectSchemas(c *osb.Catalog, reuse map[schemaKey]*schemaResult) *schemaSet {
	ss := &schemaSet{uses: make([][][numSchemaKinds]int, len(c.Services)), byKey: map[schemaKey]*schemaResult{}}
	index := map[schemaKey]int{}
	var fresh []*schemaResult
	for i := range c.Services {
		plans := c.Services[i].Plans
		ss.uses[i] = make([][numSchemaKinds]int, len(plans))
		for j := range plans {
			for k := range SchemaKind(numSchemaKinds) {
				raw := rawSchema(&plans[j], k)
				if raw == nil {
					ss.uses[i][j][k] = -1
					continue
				}
				key := schemaKey(sha256.Sum256(raw))
				r, ok := index[key]
				if !ok {
					r = len(ss.results)
					index[key] = r
					res := reuse[key]
					if res == nil {
						res = &schemaResult{raw: raw}
						fresh = append(fresh, res)
					}
					ss.results = append(ss.results, res)
					ss.byKey[key] = res
				}
				ss.uses[i][j][k] = r
			}
		}
	}
	inParallel(len(fresh), func(n int) { fresh[n].problems = checkSchema(fresh[n].raw) })
	return ss
}

// compileAll compiles every schema not compiled yet.
func (ss *schemaSet) compileAll() {
	inParallel(len(ss.results), func(n int) { ss.results[n].compile() })
}

// inParallel calls f(0) to f(n-1) on up to GOMAXPROCS goroutines.
func inParallel(n int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
