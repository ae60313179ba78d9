package policy

import (
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// maxFastPrograms bounds the combined programs a Set keeps: one per set of
// policies calls matched (a few per endpoint and plan in practice).
const maxFastPrograms = 256

// fastPrograms are a Set's combined programs. Each is the disjunction of
// its policies' refusals, "(deny) || !(require) || …": CEL's || is
// false only when every operand is false, and an error in any operand
// makes it true or an error, never false. So a call for which it is false
// is refused by no rule (and no rule failed), in one evaluation instead of
// one per rule; any other outcome evaluates the rules one by one. Safe
// for concurrent use.
type fastPrograms struct {
	mu    sync.Mutex
	progs sync.Map // uint64 mask → *program (nil: none can be built)
	n     int
}

// passes reports whether no deny or require rule of matched refuses the
// call, as far as the combined program can tell; false: look one by one.
func (f *fastPrograms) passes(mask uint64, matched []*Policy, a *activation) bool {
	if mask == 0 {
		return true
	}
	pr, ok := f.progs.Load(mask)
	if !ok {
		pr = f.build(mask, matched)
	}
	prg, _ := pr.(*program)
	if prg == nil {
		return false
	}
	out, err := prg.eval(a)
	return err == nil && out == types.False
}

// build compiles the combined program of matched and keeps it (or nil,
// when it cannot be built or the bound is reached).
func (f *fastPrograms) build(mask uint64, matched []*Policy) any {
	var parts []string
	comprehension := false
	for _, p := range matched {
		for _, r := range []struct {
			prg *program
			neg string
		}{{p.deny, ""}, {p.require, "!"}} {
			if r.prg != nil {
				parts = append(parts, r.neg+"("+r.prg.src+")")
				comprehension = comprehension || r.prg.comprehension
			}
		}
	}
	var prg *program
	if len(parts) == 0 {
		prg = &program{src: "false", prg: constFalse}
	} else if e, err := env(); err == nil {
		src := strings.Join(parts, " || ")
		if ast, iss := e.Compile(src); iss.Err() == nil {
			opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
			if comprehension {
				opts = append(opts, cel.CostLimit(MaxCost*uint64(len(parts))))
			}
			if p, err := e.Program(ast, opts...); err == nil {
				prg = &program{src: src, prg: p}
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n >= maxFastPrograms {
		return prg // used this once, not kept
	}
	f.n++
	got, _ := f.progs.LoadOrStore(mask, prg)
	return got
}

// constFalse is a program of "false", for matched policies without deny
// or require rules.
var constFalse = func() cel.Program {
	e, _ := env()
	ast, _ := e.Compile("false")
	p, _ := e.Program(ast)
	return p
}()
