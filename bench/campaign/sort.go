package main

import (
	"slices"
	"strings"
)

func sortInst(c []*pinst) {
	slices.SortFunc(c, func(a, b *pinst) int { return strings.Compare(a.id, b.id) })
}

func sortedInst(m map[string]*pinst) []*pinst {
	c := make([]*pinst, 0, len(m))
	for _, in := range m {
		c = append(c, in)
	}
	sortInst(c)
	return c
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
