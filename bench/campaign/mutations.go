package main

import "github.com/osb-gateway/osb-gateway/internal/mutation"

// mutationNames are the names -mutation takes.
func mutationNames() []string {
	var out []string
	for _, m := range mutation.All {
		out = append(out, m.Name)
	}
	return out
}

// tagOf is the build tag of the mutation name ("" when there is none).
func tagOf(name string) string {
	for _, m := range mutation.All {
		if m.Name == name {
			return m.Tag
		}
	}
	return ""
}
