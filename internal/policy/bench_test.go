package policy

import (
	"fmt"
	"strings"
	"testing"
)

// benchSpecs are n policies of the kinds operators write.
func benchSpecs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "- name: p-%d\n", i)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "  deny: \"has(request.parameters.size) && request.parameters.size > %d\"\n", 100+i)
		case 1:
			fmt.Fprintf(&b, "  require: \"context.organization_guid != 'blocked-%d'\"\n", i)
		case 2:
			fmt.Fprintf(&b, "  deny: \"glob(context.space_name, 'forbidden-%d-*')\"\n", i)
		case 3:
			fmt.Fprintf(&b, "  deny: \"request.parameters.region in ['r-%d', 'x-%d']\"\n", i, i)
		case 4:
			b.WriteString("  require: \"tenant == 'cf' && plan.name == 'small'\"\n")
		}
	}
	return b.String()
}

// BenchmarkEvaluate is the engine alone: 20 policies against a provision.
func BenchmarkEvaluate(b *testing.B) {
	set := compileYAML(b, benchSpecs(20))
	in := provision(`{"size":5,"region":"eu-1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if v := set.Evaluate(in, false); v.Denied != nil {
			b.Fatal(v.Denied)
		}
	}
}

// BenchmarkEvaluateTrivial: 20 policies of `tenant == 'x'`, the floor of
// per-rule overhead.
func BenchmarkEvaluateTrivial(b *testing.B) {
	var sb strings.Builder
	for i := range 20 {
		fmt.Fprintf(&sb, "- name: p-%d\n  deny: \"tenant == 'x'\"\n", i)
	}
	set := compileYAML(b, sb.String())
	in := provision(`{"size":5,"region":"eu-1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if v := set.Evaluate(in, false); v.Denied != nil {
			b.Fatal(v.Denied)
		}
	}
}
