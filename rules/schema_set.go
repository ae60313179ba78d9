package rules

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// schemaKey identifies a parameter schema by the SHA-256 of its bytes as
// the broker sent them: equal bytes compile to equal schemas.
type schemaKey [sha256.Size]byte

// schemaResult is one compiled schema and its problems. It is immutable
// once compiled, so indexes of successive catalog versions share it.
type schemaResult struct {
	compiled *CompiledSchema
	problems []schemaProblem
}

// schemaSet holds a catalog's distinct parameter schemas, each compiled
// once, and which plan uses which.
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

// schemaJob is a schema still to compile and where its result goes.
type schemaJob struct {
	raw []byte
	res *schemaResult
}

// compileSchemas compiles every distinct parameter schema of the catalog,
// taking those found in reuse (a previous version's results) as they are.
func compileSchemas(c *osb.Catalog, reuse map[schemaKey]*schemaResult) *schemaSet {
	ss := &schemaSet{uses: make([][][numSchemaKinds]int, len(c.Services)), byKey: map[schemaKey]*schemaResult{}}
	index := map[schemaKey]int{}
	var jobs []schemaJob
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
						res = &schemaResult{}
						jobs = append(jobs, schemaJob{raw, res})
					}
					ss.results = append(ss.results, res)
					ss.byKey[key] = res
				}
				ss.uses[i][j][k] = r
			}
		}
	}
	runSchemaJobs(jobs)
	return ss
}

// runSchemaJobs compiles the jobs on up to GOMAXPROCS goroutines.
func runSchemaJobs(jobs []schemaJob) {
	run := func(job schemaJob) { job.res.compiled, job.res.problems = compileSchema(job.raw) }
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers <= 1 {
		for _, job := range jobs {
			run(job)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := int(next.Add(1) - 1); n < len(jobs); n = int(next.Add(1) - 1) {
				run(jobs[n])
			}
		})
	}
	wg.Wait()
}
