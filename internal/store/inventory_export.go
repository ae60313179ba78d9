package store

import (
	"cmp"
	"context"
	"iter"
)

// exportPage is how many records Export reads at a time.
const exportPage = 1000

// bindingPos is a place in the order of all bindings: (broker, instance
// id, binding id). The zero value is before the first binding.
type bindingPos struct{ broker, instance, binding string }

func comparePos(a, b bindingPos) int {
	return cmp.Or(cmp.Compare(a.broker, b.broker), cmp.Compare(a.instance, b.instance), cmp.Compare(a.binding, b.binding))
}

// bindingsAfter returns up to limit bindings after pos, in order, the
// position to continue after (the last binding it looked at, which may
// have been deleted before it was read), and whether it reached the last
// binding. Each backend has one.
type bindingsAfter func(ctx context.Context, pos bindingPos, limit int) ([]Binding, bindingPos, bool, error)

// export is Export for any backend: the instances page by page through
// list, then the bindings through after.
func export(ctx context.Context, list func(context.Context, InstanceFilter, string, int) ([]Instance, string, error),
	after bindingsAfter) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		cursor := ""
		for {
			page, next, err := list(ctx, InstanceFilter{}, cursor, exportPage)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for i := range page {
				if !yield(Entry{Instance: &page[i]}, nil) {
					return
				}
			}
			if cursor = next; next == "" {
				break
			}
		}
		var pos bindingPos
		for {
			page, next, done, err := after(ctx, pos, exportPage)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for i := range page {
				if !yield(Entry{Binding: &page[i]}, nil) {
					return
				}
			}
			if done {
				return
			}
			pos = next
		}
	}
}
